"""``python -m pe_tutorial.benchmarks SUITE``: see ``pe_tutorial.benchmarks.cli``."""

import sys

from .cli import main

sys.exit(main())
