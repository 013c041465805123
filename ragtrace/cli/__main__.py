"""``python -m ragtrace.cli``."""

import sys

from . import main

sys.exit(main())
