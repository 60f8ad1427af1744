"""The name rule over the command line's options that came with later issues (``roll --missing``
and ``--project``, ``rebase --missing``, ``verify --against``) and over target.toml's
``[audit]``, on a copy of the committed targets (the served ``spec-0.9`` ones included, whose
names carry dots): a hostile value is refused with exit status 2, naming it and the rule,
before anything is read or written; every committed target's name follows the rule.

In one process (``patchwheel.cli.main``) for speed; the black-box test of every verb is
``tests/integration/test_hardening_roll.py``.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest

from patchwheel.cli import main
from patchwheel.config.targets import list_target_names, load_target
from patchwheel.errors import ConfigError
from tests import support

RULE = "a name is one plain path component"
HOSTILE = ["../x", "a/b", "-x", "a b", "/abs/x", "../patches/spec-0.9"]


def snapshot(root: Path) -> dict[str, bytes | str]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names")
    shutil.copytree(support.REPO_ROOT / "patches", root / "patches")
    return root


def run(root: Path, *argv: str) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            status = main(["--root", str(root), *argv])
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    return status, " ".join((out.getvalue() + err.getvalue()).split())


def test_every_committed_target_follows_the_rule() -> None:
    names = list_target_names(support.REPO_ROOT / "patches")
    assert {"spec-0.9", "spec-0.9-vllm-0.26", "vllm-0.32"} <= set(names)
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name)
        assert load_target(support.REPO_ROOT / "patches", name).name == name


def calls(hostile: str) -> list[list[str]]:
    return [
        ["roll", "--target", "vllm-0.32", f"--missing={hostile}=keep"],
        ["roll", "--target", "vllm-0.32", f"--missing=vllm:{hostile}=drop"],
        ["roll", "--target", "vllm-0.32", f"--project={hostile}"],
        ["rebase", "--target", "vllm-0.32", "--onto", "vllm==0.33.0", f"--missing={hostile}=keep"],
        ["verify", "--target", "spec-0.9", f"--against={hostile}"],
        ["verify", "--target", "spec-0.9-vllm-0.26", f"--against={hostile}"],
    ]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_later_options_refuse_a_hostile_name_and_touch_nothing(
    checkout: Path, hostile: str
) -> None:
    before = snapshot(checkout)
    for argv in calls(hostile):
        status, text = run(checkout, *argv)
        assert status == 2, (argv, text)
        assert repr(hostile) in text and RULE in text, (argv, text)
        assert "Traceback" not in text
        assert snapshot(checkout) == before, argv


def test_a_hostile_name_in_the_audit_table_is_refused(tmp_path: Path) -> None:
    shutil.copytree(support.REPO_ROOT / "patches" / "spec-0.9", tmp_path / "spec-0.9")
    shutil.copytree(support.REPO_ROOT / "patches" / "pools", tmp_path / "pools")
    toml = tmp_path / "spec-0.9" / "target.toml"
    text = toml.read_text()
    assert 'consumers = ["speculators", "hs-connectors"]' in text
    for bad in ('consumers = ["speculators", "../x"]', 'provider = "a/b"'):
        key = bad.split(" = ")[0]
        lines = [bad if line.startswith(f"{key} = ") else line for line in text.splitlines()]
        toml.write_text("\n".join(lines) + "\n")
        with pytest.raises(ConfigError, match=RULE) as info:
            load_target(tmp_path, "spec-0.9")
        assert "[audit]" in str(info.value)
