"""Every command README and the tutorial show is one that runs as written.

The install commands are held by tests/index/test_consumer.py (each block is exactly what
`patchwheel.index.consumer` renders; the integration suite runs those renderings). Every other
line of a ``bash`` block here must be `pip install nox` (what .ci/run installs), a nox session
the noxfile defines, given arguments that the `patchwheel` verb it runs accepts, or a
`patchwheel` / `python -m patchwheel.results` command its own parser accepts.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex

import pytest

from patchwheel.cli import _parser
from tests import support

ROOT = support.REPO_ROOT
PAGES = ["README.md", "docs/tutorial.md"]
BLOCK = re.compile(r"(?:<!-- consumer: [^>]+ -->\n)?```bash\n(.*?)```", re.DOTALL)


def commands(page: str) -> list[str]:
    """The lines of the page's bash blocks that are not install commands (comments dropped,
    continuation lines joined)."""
    out = []
    for found in BLOCK.finditer((ROOT / page).read_text("utf-8")):
        if found.group(0).startswith("<!-- consumer:"):
            continue
        text = found.group(1).replace("\\\n", " ")
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def sessions() -> dict[str, str | None]:
    """Each nox session of noxfile.py and the `patchwheel` verb it runs (None: another tool)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text("utf-8"))
    found: dict[str, str | None] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any("session" in ast.unparse(d) for d in node.decorator_list):
            continue
        verb = None
        for call in ast.walk(node):
            if (
                isinstance(call, ast.Call)
                and ast.unparse(call.func) == "session.run"
                and len(call.args) >= 2
                and ast.unparse(call.args[0]) == "'patchwheel'"
            ):
                verb = ast.literal_eval(call.args[1])
        found[node.name] = verb
    return found


def _parses(argv: list[str]) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            _parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"patchwheel {' '.join(argv)}: refused by the parser: {err.getvalue()}")


@pytest.mark.parametrize("page", PAGES)
def test_every_command_shown_runs_as_written(page: str) -> None:
    shown = commands(page)
    assert shown, f"{page} shows no command"
    known = sessions()
    for line in shown:
        argv = shlex.split(line)
        if argv == ["pip", "install", "nox"]:
            assert "pip install --quiet --upgrade nox" in (ROOT / ".ci/run").read_text("utf-8")
        elif argv[:2] == ["nox", "-s"]:
            name, rest = argv[2], argv[3:]
            assert name in known, f"{page}: `{line}`: noxfile.py has no session {name}"
            args = rest[1:] if rest[:1] == ["--"] else rest
            assert not rest or rest[0] == "--", f"{page}: `{line}`: arguments go after --"
            if known[name] is not None:
                _parses([known[name], *args])
        elif argv[0] == "patchwheel":
            _parses(argv[1:])
        else:
            pytest.fail(f"{page}: `{line}` is no command this test knows how to hold")


def test_the_tutorial_shows_the_default_build_and_its_verification() -> None:
    shown = commands("docs/tutorial.md")
    assert "nox -s build" in shown and "nox -s verify" in shown
    assert sessions()["build"] == "build" and sessions()["verify"] == "verify"
