"""``python -m patchwheel``."""

import sys

from patchwheel.cli import main

sys.exit(main())
