"""``patchwheel bisect`` end to end: the real command on a vLLM-shaped history and a checkout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import support
from tests.bisect import _history


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> _history.Setup:
    made = _history.make_setup(tmp_path_factory.mktemp("bisect-cli"))
    _history.lock(made)
    return made


def test_the_command_writes_both_reports(setup: _history.Setup, tmp_path: Path) -> None:
    result = support.patchwheel(
        setup.root,
        "bisect",
        "--target",
        "old",
        "--good",
        "v0.1.0",
        "--bad",
        "v0.2.0",
        "--repo",
        str(setup.history.repo),
        "--report-dir",
        str(tmp_path / "reports"),
        cache=setup.cache,
    )
    assert result.returncode == 0, result.stderr
    appears = setup.history.commits[_history.APPEARS]
    site = "src/speculators/generator.py:12:11"
    assert (
        f"unexpected-argument eos_token_id at {site} appears at commit {appears}" in result.stderr
    )
    assert "(#1041)" in result.stderr
    hook = setup.history.commits[_history.HOOK]
    assert (
        "override-signature kv_layer at src/speculators/connector.py:5:4 appears at commit "
        f"{hook}" in result.stderr
    )
    assert "2 change(s) located" in result.stderr
    # The two ends + at most 7 steps per change (the second shares the first's probes).
    assert result.stderr.count("bisect old run ") <= 2 + 7 + 7
    data = json.loads((setup.root / "build" / "old" / "bisect.json").read_text())
    assert data["flips"][0]["commit"]["id"] == appears
    assert data["command"].startswith("patchwheel --root ")
    assert "bisect --target old --good v0.1.0 --bad v0.2.0" in data["command"]
    assert (tmp_path / "reports" / "bisect.md").read_text() == (
        setup.root / "build" / "old" / "bisect.md"
    ).read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--good=--upload-pack=touch x", "--bad", "v0.2.0"], "looks like an option"),
        (["--good", "v0.1.0", "--bad", "nope"], "--bad 'nope': no such commit"),
        (["--good", "v0.1.0", "--bad", "v0.2.0", "--project", "torch"], "--project 'torch'"),
    ],
)
def test_bad_input_is_one_line_and_status_1(
    setup: _history.Setup, args: list[str], message: str
) -> None:
    result = support.patchwheel(
        setup.root,
        "bisect",
        "--target",
        "old",
        "--repo",
        str(setup.history.repo),
        *args,
        cache=setup.cache,
    )
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "bisect old run" not in result.stderr  # refused before any audit
