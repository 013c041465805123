"""``python -m ragtrace``: the ``ragtrace`` command line (see ``ragtrace.cli``)."""

import sys

from .cli import main

sys.exit(main())
