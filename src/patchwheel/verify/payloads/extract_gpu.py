"""``extract.py`` plus what the engine really ran with: a standalone script for the python that
holds the wheels (torch, vllm, speculators; not patchwheel).

    python extract_gpu.py REQUEST.json OUT_DIR

Runs ``extract.py``'s ``run`` unchanged (speculators' own VllmHiddenStatesGenerator, every
returned tensor saved), and while the generator is alive reads its engine's effective settings
(:func:`oracle.engine_settings`) and every worker's model runner and attention/MoE
implementations (:func:`oracle.worker_facts`, through the executor's ``collective_rpc``); both
go into ``OUT_DIR/result.json`` beside extract.py's fields.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

VERIFY_DIR = Path(__file__).resolve().parent  # extract.py and oracle.py, beside this file
FACTS: dict[str, Any] = {}


def _record_engine() -> None:
    """Wrap the generator's __init__: once it is built, note its engine's settings."""
    oracle: Any = importlib.import_module("oracle")
    from speculators.data_generation import vllm_hidden_states_generator as module

    cls: Any = module.VllmHiddenStatesGenerator
    original = cls.__init__

    @functools.wraps(original)  # extract.py reads the generator's signature through this
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        config = getattr(self, "vllm_config", None) or self.executor.vllm_config
        FACTS["effective_settings"] = oracle.engine_settings(config)
        try:
            FACTS["workers"] = list(self.executor.collective_rpc(oracle.worker_facts))
        except Exception as exc:  # recorded: the settings above still stand
            FACTS["workers_error"] = f"{type(exc).__name__}: {exc}"

    cls.__init__ = init


def main(argv: list[str] | None = None) -> int:
    """``python extract_gpu.py REQUEST OUT_DIR``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    # This folder (the payloads) moved from the front of the path to its end, and last on the
    # workers' path: extract.py and oracle.py importable, shadowing nothing.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p and str(Path(p).resolve()) != here]
    sys.path.append(str(VERIFY_DIR))
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([*parts, str(VERIFY_DIR)])
    extract: Any = importlib.import_module("extract")
    out_dir = Path(args[1])
    try:
        _record_engine()
    except Exception:
        traceback.print_exc()  # extract.run reports the import failure with its diagnosis
    status = int(extract.main(args))
    result_path = out_dir / "result.json"
    if status == 0 and result_path.is_file():
        result = json.loads(result_path.read_text(encoding="utf-8"))
        result.update(FACTS)
        result_path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
