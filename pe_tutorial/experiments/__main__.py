"""``python -m pe_tutorial.experiments --preset NAME``: see ``pe_tutorial.experiments``."""

import sys

from . import main

sys.exit(main())
