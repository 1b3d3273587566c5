"""Imports for the export/view tests: always the repository's code.

`iotrace.export` and `iotrace.view` are taken from src/ even where another
`iotrace` is installed (an older wheel) or where the compiled `_core` that
`iotrace/__init__.py` loads is not built: the exporter needs none of it. The
trace reader comes from analyzer/.
"""

from __future__ import annotations

import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC_PACKAGE = os.path.join(ROOT, "src", "iotrace")


def ensure_paths() -> None:
    for path in (os.path.join(ROOT, "analyzer"), os.path.join(ROOT, "src")):
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        import iotrace
    except ImportError:  # the core is not built: a bare package will do
        for name in [m for m in sys.modules if m.split(".")[0] == "iotrace"]:
            del sys.modules[name]
        iotrace = types.ModuleType("iotrace")
        iotrace.__path__ = []
        sys.modules["iotrace"] = iotrace
    # Subpackages resolve from the repository first, whichever iotrace loaded.
    if SRC_PACKAGE not in iotrace.__path__:
        iotrace.__path__.insert(0, SRC_PACKAGE)


ensure_paths()
