"""``python -m patchwheel.cli`` (the same as ``python -m patchwheel``)."""

import sys

from patchwheel.cli import main

sys.exit(main())
