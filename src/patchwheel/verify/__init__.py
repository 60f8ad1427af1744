"""Verification of built wheels: speculators' hidden-state extraction vs a transformers reference.

`verify_cpu` (in `patchwheel.verify.cpu`) is the entry point; `extract.py` is the script the
verify venv runs. Importing this package does not import torch.
"""

from __future__ import annotations
