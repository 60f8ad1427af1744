"""Sub-commands of the layers above the pipeline (audit, verify, rebase, publish …).

cli.py asks this module which sub-commands exist, so the core CLI never imports those layers
at start-up and a layer can be added by appending its registrar here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

REGISTRARS: list[Registrar] = []


def build_audit_hook(allow_findings: bool) -> Any:
    """The audit to run inside ``build`` (None until the audit layer is installed)."""
    del allow_findings
    return None
