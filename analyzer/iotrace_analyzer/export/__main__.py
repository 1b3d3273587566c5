"""`python -m iotrace_analyzer.export export ...`: the command without `iotrace.cli`."""

import sys

from .cli import main

sys.exit(main())
