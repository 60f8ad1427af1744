"""Sphinx configuration of patchwheel's manual (MyST Markdown; `nox -s docs`)."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "patchwheel"
author = "patchwheel contributors"
copyright = "patchwheel contributors"
extensions = ["myst_parser", "patchwheel_reference"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = "patchwheel"
# Every command line and file in the manual is shown as written; no lexer guesses.
highlight_language = "none"
nitpicky = True
