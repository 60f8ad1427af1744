"""``python -m patchwheel.verify.gpu`` (what ``nox -s gpu`` runs with the GPU machine's python)."""

import sys

from patchwheel.verify.gpu.session import main

sys.exit(main())
