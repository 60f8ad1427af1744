"""Drop-When predicates: the series' own wording, evaluated with three-valued logic."""

from __future__ import annotations

import pytest
from packaging.version import Version

from patchwheel.config.lock import LockedPin
from patchwheel.patching.patches import read_series
from patchwheel.rebase.dropwhen import all_of, any_of, evaluate, pin_versions
from tests import support

AT_040 = {"speculators": Version("0.4.0"), "vllm": Version("0.16.0")}
AT_030 = {"speculators": Version("0.3.0"), "vllm": Version("0.16.0")}


@pytest.mark.parametrize(
    ("text", "versions", "value"),
    [
        ("speculators pin >= 0.4.0 or vLLM pin < 0.12", AT_040, True),
        ("speculators pin >= 0.4.0 or vLLM pin < 0.12", AT_030, False),
        ("the speculators pin is >= 0.4.0", AT_040, True),
        ("the speculators pin is >= 0.4.0", AT_030, False),
        ("speculators pin >= 0.4.0 or vLLM pin <= 0.11.0", {"vllm": Version("0.11.0")}, True),
        # prose is unknown; "or" with a true side is true, with a false side unknown
        ("speculators pin passes block_size to Scheduler, or vLLM pin <= 0.11.0", AT_030, None),
        (
            "speculators pin passes block_size to Scheduler, or vLLM pin <= 0.11.0",
            {"speculators": Version("0.3.0"), "vllm": Version("0.11.0")},
            True,
        ),
        ("speculators builds from sdists keep version.py upstream", AT_040, None),
        (
            "speculators pin supports transformers 5, or vLLM pin requires transformers < 5",
            AT_040,
            None,
        ),
        # "and": a false side makes it false, an unknown side keeps it unknown
        ("vLLM pin < 0.12 and torch pin > 2", {"vllm": Version("0.11.0")}, None),
        ("vLLM pin < 0.12 and torch pin > 2", {"vllm": Version("0.16.0")}, False),
        ("speculators pin >= 0.4.0 and vLLM pin >= 0.16", AT_040, True),
        # a project pinned without a version (a git pin): unknown
        ("vLLM pin < 0.12", {"vllm": None}, None),
        # a nightly's local label marks a build: compared on the public version
        (
            "vLLM pin >= 0.33.1rc1.dev123",
            {"vllm": Version("0.33.1rc1.dev123+g1a2b3c4d5.cpu")},
            True,
        ),
        ("vLLM pin < 0.34", {"vllm": Version("0.33.1rc1.dev123+g1a2b3c4d5")}, True),
        ("VLLM PIN == 0.16.0.", AT_040, True),
        ("speculators pin >= not.a.version", AT_040, None),
        ("", AT_040, None),
    ],
)
def test_evaluate(text: str, versions: dict[str, Version | None], value: bool | None) -> None:
    result = evaluate(text, versions)
    assert result.value is value
    assert result.holds is (value is True)


def test_explain_names_each_clause() -> None:
    result = evaluate("speculators pin >= 0.4.0 or vLLM pin < 0.12", AT_040)
    assert result.explain() == (
        "`speculators pin >= 0.4.0`: true (speculators 0.4.0); "
        "`vLLM pin < 0.12`: false (vllm 0.16.0)"
    )
    prose = evaluate("upstream fixes it", AT_040)
    assert "unknown (prose" in prose.explain()


def test_three_valued_tables() -> None:
    assert any_of([None, True]) is True and any_of([None, False]) is None
    assert any_of([False, False]) is False and any_of([]) is None
    assert all_of([None, False]) is False and all_of([None, True]) is None
    assert all_of([True, True]) is True and all_of([]) is None


def test_every_predicate_of_the_committed_series_evaluates() -> None:
    """Each Drop-When in patches/*/*/ (targets' series and pools) evaluates without error; at
    speculators 0.4.0 exactly the vLLM 0.16 patches 0001-0003 of the speculators 0.3.0 pool
    hold, and no predicate holds at the targets' own pins."""
    holding = set()
    for series in sorted((support.REPO_ROOT / "patches").glob("*/*/series")):
        for patch in read_series(series.parent):
            text = patch.fields.get("Drop-When", "")
            assert text, patch.name
            assert evaluate(text, AT_030).value is not True, (series, patch.name)
            if patch.name.startswith("v0.16-") and evaluate(text, AT_040).holds:
                holding.add(patch.name.removeprefix("v0.16-")[:4])
    if (support.REPO_ROOT / "patches" / "vllm-0.16").is_dir():
        assert holding == {"0001", "0002", "0003"}


def test_pin_versions_from_the_lock() -> None:
    entries = [
        LockedPin(
            "speculators",
            "speculators==0.4.0",
            "sdist",
            sha256="0" * 64,
            filename="speculators-0.4.0.tar.gz",
        ),
        LockedPin(
            "vllm",
            "vllm @ git+https://example.com/vllm@" + "a" * 40,
            "git",
            commit="a" * 40,
            version="0.33.1rc1.dev5+gaaaaaaaaa",
        ),
        LockedPin(
            "vllm:cpu",
            "vllm @ https://example.com/vllm-0.33.0-py3-none-any.whl",
            "wheel",
            sha256="1" * 64,
            filename="vllm-0.33.0-py3-none-any.whl",
        ),
        LockedPin("other", "other @ ./src", "directory"),
    ]
    assert pin_versions(entries) == {
        "speculators": Version("0.4.0"),
        "vllm": Version("0.33.1rc1.dev5+gaaaaaaaaa"),
        "other": None,
    }
