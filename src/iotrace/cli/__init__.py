"""The `iotrace` command. One module per subcommand; each adds its parser with add_parser.

Commands of other installed packages plug in through the entry-point group
`iotrace.commands` (name = "module:function", the function adds the subparser): `export`
comes from iotrace_analyzer that way, so the tracer imports nothing of the read side. The
entry points are looked up only when the command is not one of ours (or for --help):
`iotrace run` and `iotrace cat` start without scanning the installed packages.
"""
from __future__ import annotations

import argparse
import sys

from .._version import __version__
from . import cat, recover, run, view

BUILTIN = {"run": run, "preload-path": run, "cat": cat, "recover": recover, "view": view}
PLUGIN_GROUP = "iotrace.commands"


def _plugins() -> list:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=PLUGIN_GROUP), key=lambda ep: ep.name)


def _needs_plugins(argv: list[str]) -> bool:
    """Whether the command line names a command that is not built in (or asks for help)."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return True
        if not arg.startswith("-"):
            return arg not in BUILTIN
    return True


def build_parser(plugins: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="iotrace", description="Low-overhead I/O and dataflow tracer.")
    p.add_argument("--version", action="version", version=f"iotrace {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (run, cat, recover, view):
        module.add_parser(sub)
    if plugins:
        for ep in _plugins():
            if ep.name in BUILTIN:
                continue
            try:
                ep.load()(sub)
            except Exception as exc:  # a broken plugin must not take the tracer's CLI down
                print(f"iotrace: command {ep.name!r} ({ep.value}) could not be loaded: {exc}",
                      file=sys.stderr)
    return p


def _command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand `name` (the top-level one if there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name, parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(plugins=_needs_plugins(argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Said by the subcommand's parser: its usage, not the list of commands.
        _command_parser(parser, args.command).error("unrecognized arguments: " + " ".join(unknown))
    return args.func(args)
