"""Static API-drift audit: a consumer's (speculators', hs-connectors') use of a provider (vLLM).

The consumer is type-checked against the provider it declares (the baseline) and against the
new one; what only the new one breaks is drift, reported with both locations and the symbol's
old and new signature. Drift is judged for the consumer's calls, attribute reads and imports,
for its plugin contract (each override of a provider method against its base, hooks the
provider removed, abstract methods it added, private provider API) and for the classes and
methods it names by string for the provider to resolve. Entry points, from the most to the
least concrete:

- `run_audit` takes source trees already on disk; `audit_runs` several consumers' trees
  against one provider and baseline (one engine check for all, one report each);
- `audit_pins` takes pins (or directories) and resolves them with `patchwheel.upstream.sources`;
  `audit_consumers` several consumers' pins against one provider.
"""

from __future__ import annotations

from patchwheel.audit.engine import Engine, MypyEngine
from patchwheel.audit.findings import Kind
from patchwheel.audit.named import VLLM, NamingRules
from patchwheel.audit.report import AuditReport, BlindSpot, Finding, PrivateUse
from patchwheel.audit.run import Consumer, audit_consumers, audit_pins, audit_runs, run_audit

__all__ = [
    "VLLM",
    "AuditReport",
    "BlindSpot",
    "Consumer",
    "Engine",
    "Finding",
    "Kind",
    "MypyEngine",
    "NamingRules",
    "PrivateUse",
    "audit_consumers",
    "audit_pins",
    "audit_runs",
    "run_audit",
]
