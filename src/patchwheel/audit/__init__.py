"""Static API-drift audit: every call from a consumer (speculators) into a provider (vLLM).

The consumer is type-checked against the provider it declares (the baseline) and against the
new one; what only the new one breaks is drift, reported with both locations and the symbol's
old and new signature. Entry points, from the most to the least concrete:

- `run_audit` takes source trees already on disk;
- `audit_pins` takes pins (or directories) and resolves them with `patchwheel.upstream.sources`.
"""

from __future__ import annotations

from patchwheel.audit.engine import Engine, MypyEngine
from patchwheel.audit.findings import Kind
from patchwheel.audit.report import AuditReport, BlindSpot, Finding
from patchwheel.audit.run import audit_pins, run_audit

__all__ = [
    "AuditReport",
    "BlindSpot",
    "Engine",
    "Finding",
    "Kind",
    "MypyEngine",
    "audit_pins",
    "run_audit",
]
