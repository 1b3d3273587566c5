"""`python -m iotrace.export export|view ...`: the commands without `iotrace.cli`."""

import sys

from .cli import main

sys.exit(main())
