"""The scripts the wheels' own python runs (torch, vllm, speculators, transformers; never
patchwheel), and :func:`script`, the one way patchwheel finds them.

Each module here is a standalone script (``python extract.py REQUEST.json OUT_DIR``) or a
sibling such a script imports through its folder on ``sys.path`` (``savejob``, ``oracle``,
``diskio``). They import nothing from patchwheel (an import-linter contract in pyproject.toml),
so the python that holds the wheels can run them from this folder as they are. ``importtrace/``
holds the import trace's ``sitecustomize.py`` (that folder goes on a child's PYTHONPATH).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FOLDER", "IMPORT_TRACE", "SCRIPTS", "script"]

FOLDER = Path(__file__).resolve().parent
IMPORT_TRACE = FOLDER / "importtrace"
SCRIPTS = (
    "extract",
    "extract_gpu",
    "oracle",
    "pipeline",
    "served_pipeline",
    "speed",
    "train_draft",
)


def script(name: str) -> Path:
    """The path of payload script ``name`` (``"extract"``, not ``"extract.py"``)."""
    if name not in SCRIPTS:
        raise ValueError(f"no payload script {name!r}; the scripts are {', '.join(SCRIPTS)}")
    return FOLDER / f"{name}.py"
