"""The audit at the end of a rebase says when it could not run, instead of 'ran'.

A consumer (``cons``, declaring ``prov==1.0``) and its provider (``prov``) are real git
projects; the consumer is rebased onto a new tag, so the audit's baseline is the provider
version the consumer declares, fetched from the package index.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests import support
from tests.conftest import Checkout

PROV_API = '''\
def call(a: int, b: int = 1) -> int:
    """Add."""
    return a + b
'''
CONS_USE = """\
from prov.api import call


def go() -> int:
    return call(1, b=2)
"""


def git_project(path: Path, name: str, files: dict[str, str], deps: list[str]) -> Path:
    path.mkdir(parents=True)
    pyproject = f"""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{name}"
        version = "1.0"
        dependencies = {json.dumps(deps)}

        [tool.setuptools.packages.find]
        where = ["src"]
        """
    (path / "pyproject.toml").write_text(textwrap.dedent(pyproject))
    for rel, text in {f"src/{name}/__init__.py": "", **files}.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    support.run_git(path, "init", "-q", "-b", "main")
    support.run_git(path, "add", "-A")
    support.run_git(path, "commit", "-q", "-m", "initial")
    support.run_git(path, "tag", "v1.0")
    return path


def test_an_audit_that_cannot_run_is_reported_as_failed_not_ran(tmp_path: Path) -> None:
    prov = git_project(tmp_path / "prov", "prov", {"src/prov/api.py": PROV_API}, [])
    cons = git_project(tmp_path / "cons", "cons", {"src/cons/use.py": CONS_USE}, ["prov==1.0"])
    root = tmp_path / "checkout"
    co = Checkout(root=root, cache=tmp_path / "cache", upstream=cons)
    (root / "patches" / "tiny").mkdir(parents=True)
    (root / "patches" / "tiny" / "target.toml").write_text(
        textwrap.dedent(
            f"""\
            description = "consumer and provider"
            default = true

            [projects.cons]
            build = "source"
            pin = "cons @ git+{cons.as_uri()}@v1.0"

            [projects.prov]
            build = "source"
            pin = "prov @ git+{prov.as_uri()}@v1.0"
            """
        )
    )
    support.run_git(cons, "checkout", "-q", "-b", "work", "v1.0")
    support.edit_and_commit(cons, "src/cons/use.py", lambda t: t + "\n# patched\n", "cons: note")
    support.format_patches(cons, "v1.0", co.series_dir(project="cons"))
    support.run_git(cons, "checkout", "-q", "main")
    support.commit_file(cons, "NEWS", "v2\n", "news")
    support.run_git(cons, "tag", "v2.0")
    empty_index = tmp_path / "index"
    empty_index.mkdir()
    env = {"PATCHWHEEL_INDEX_URL": empty_index.as_uri() + "/"}
    assert co.run("lock", env=env).returncode == 0
    assert co.run("build", "--no-audit", env=env).returncode == 0
    onto = f"cons @ git+{cons.as_uri()}@v2.0"

    # prov==1.0, the consumer's declared baseline, is not on the index: the audit cannot run.
    failed = co.run("rebase", "--onto", onto, "--new-target", "t2", env=env)
    assert failed.returncode == 1, failed.stderr
    err = " ".join(failed.stderr.split())
    assert "the rebase is done, but The audit could not run for 1 of 1 pair(s)" in err
    assert "NOT audited" in err and "prov==1.0" in err
    report = json.loads((root / "build" / "t2" / "rebase.json").read_text())
    assert report["audit"]["status"] == "failed"
    assert "error" in report["audit"]["pairs"][0]
    assert "NOT audited" in (root / "build" / "t2" / "rebase.md").read_text()

    # With the baseline on the index, the same rebase's audit runs and finds no drift.
    sdist = support.make_sdist(prov, tmp_path / "files", "prov", "1.0")
    support.write_index(empty_index, [sdist])
    done = co.run("rebase", "--onto", onto, "--new-target", "t3", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads((root / "build" / "t3" / "rebase.json").read_text())
    assert report["audit"]["status"] == "ran"
    [pair] = report["audit"]["pairs"]
    assert pair["baseline"] == "prov==1.0" and pair["findings"] == []
