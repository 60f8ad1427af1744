"""Write the reference pages that come from the code, when a docs build starts.

``reference/cli.md``: every ``patchwheel`` verb, its help as the argparse parser prints it.
``reference/sessions.md``: every nox session in ``noxfile.py`` with its docstring, read with
``ast`` (no nox needed). Both are generated files (git-ignored): the parser and the noxfile
are the only sources, so the reference cannot drift from them.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
NOTE = "Generated when the docs are built (`docs/_ext/patchwheel_reference.py`); do not edit."


def _fence(text: str) -> list[str]:
    return ["```text", text.rstrip("\n").replace("```", "'''"), "```", ""]


def cli_page() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: fix it
    from patchwheel.cli import _parser  # noqa: PLC0415 (after COLUMNS is set)

    parser = _parser()
    lines = ["# The `patchwheel` command", "", NOTE, "", "```text"]
    lines += [parser.format_help().rstrip("\n").replace(str(Path.cwd()), "."), "```", ""]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        lines += [f"## patchwheel {name}", ""]
        lines += _fence(sub.format_help())
    return "\n".join(lines)


def _is_session(node: ast.FunctionDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr == "session":
            return True
    return False


def sessions_page() -> str:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    module = inspect.cleandoc(ast.get_docstring(tree) or "")
    lines = ["# The nox sessions", "", NOTE, "", "```text", module, "```", ""]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and _is_session(node):
            doc = inspect.cleandoc(ast.get_docstring(node) or "(no docstring)")
            summary, _, rest = doc.partition("\n")
            lines += [f"## nox -s {node.name}", "", summary, ""]
            if rest.strip():
                lines += _fence(inspect.cleandoc(rest))
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    text = text.rstrip("\n") + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generate(_app: Any = None) -> None:
    _write(REFERENCE / "cli.md", cli_page())
    _write(REFERENCE / "sessions.md", sessions_page())


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
