"""No false positives: a provider that really changed, in ways a caller cannot notice.

The old test compared a provider with itself, which cannot fail. Here the provider of the
mutation suite changes the way harmless releases change — optional parameters added,
keyword-only parameters reordered, new functions, classes, modules, fields and enum members,
docstrings and comments that move every line, an override dropped for the inherited method,
an annotation widened — and the consumer's calls into it must give no finding and no blind
spot. The same consumer against the same changes plus one harmful one gives exactly that
finding, so the audit did look at the changed provider.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from patchwheel.audit import Kind, MypyEngine, run_audit
from tests.audit._sample import CONSUMER, PROVIDER, write_tree

# A keyword-only factory (in both versions) and a consumer module that calls it by keyword.
BASE_PROVIDER = {k: textwrap.dedent(v).lstrip("\n") for k, v in PROVIDER.items()}
BASE_PROVIDER["prov/request.py"] += """

def make_request(*, request_id: str, prompt_token_ids: list[int], priority: int = 0) -> Request:
    return Request(request_id, prompt_token_ids)
"""
BASE_CONSUMER = {k: textwrap.dedent(v).lstrip("\n") for k, v in CONSUMER.items()}
BASE_CONSUMER["src/cons/maker.py"] = """
from prov.request import make_request


def build(ids: list[int]) -> object:
    return make_request(request_id="r", prompt_token_ids=ids, priority=2)
"""

Mutation = Callable[[dict[str, str]], None]


def edit(relative: str, old: str, new: str) -> Mutation:
    def apply(files: dict[str, str]) -> None:
        assert old in files[relative], f"{old!r} not in {relative}"
        files[relative] = files[relative].replace(old, new)

    return apply


def add(relative: str, text: str) -> Mutation:
    def apply(files: dict[str, str]) -> None:
        files[relative] = files.get(relative, "") + text

    return apply


HARMLESS: dict[str, Mutation] = {
    "optional positional parameter added": edit(
        "prov/request.py",
        "eos_token_id: int | None = None\n",
        "eos_token_id: int | None = None,\n                arrival_time: float | None = None,\n",
    ),
    "keyword-only parameters reordered, one added": edit(
        "prov/request.py",
        "*, request_id: str, prompt_token_ids: list[int], priority: int = 0",
        "*, priority: int = 0, lora: str | None = None, prompt_token_ids: list[int], "
        "request_id: str",
    ),
    "optional parameter added to a constructor": edit(
        "prov/sched.py",
        "kv_cache_config: int) -> None:",
        "kv_cache_config: int, log_stats: bool = False) -> None:",
    ),
    "annotation widened": edit(
        "prov/sched.py", "available_memory: int\n", "available_memory: int | float\n"
    ),
    "dataclass field with a default added": edit(
        "prov/config.py",
        "block_size: int = 16\n",
        "block_size: int = 16\n    chunked: bool = False\n",
    ),
    "enum member added": edit(
        "prov/request.py",
        "FINISHED_ABORTED = enum.auto()\n",
        "FINISHED_ABORTED = enum.auto()\n    PREEMPTED = enum.auto()\n",
    ),
    "override dropped for the inherited method": edit(
        "prov/executor/multiproc.py",
        """    def collective_rpc(self, method: str, args: tuple[object, ...] = ()) -> list[object]:
        return [method]
""",
        "    pass\n",
    ),
    "new function": add("prov/sched.py", "\n\ndef new_helper(x: int = 0) -> int:\n    return x\n"),
    "new module": add("prov/extra.py", "class Extra:\n    pass\n"),
    "docstrings and comments that move every line": edit(
        "prov/sched.py",
        "from dataclasses import dataclass\n",
        '"""The scheduler.\n\nIt schedules.\n"""\n\n# comment\nfrom dataclasses import dataclass\n',
    ),
    "class docstring": edit(
        "prov/request.py",
        "class Request:\n",
        'class Request:\n    """A request.\n\n    With a long docstring.\n    """\n\n',
    ),
}


def test_harmless_provider_changes_give_no_findings(tmp_path: Path, engine: MypyEngine) -> None:
    baseline = write_tree(tmp_path / "prov-1.0", BASE_PROVIDER)
    consumer = write_tree(tmp_path / "consumer", BASE_CONSUMER)
    files = dict(BASE_PROVIDER)
    for mutate in HARMLESS.values():
        mutate(files)
    assert all(files[k] != BASE_PROVIDER[k] for k in BASE_PROVIDER if k.endswith("request.py"))
    provider = write_tree(tmp_path / "prov-1.1", files)

    report = run_audit(consumer, provider, baseline, engine=engine)

    assert [(f.kind, f.symbol, f.detail) for f in report.findings] == []
    assert report.blind_spots == []
    assert report.exit_status == 0
    assert report.coverage.calls >= 9 and report.coverage.imports >= 8  # it saw the calls

    # Control: one harmful change on top (a keyword the consumer passes removed) is found.
    edit("prov/request.py", "priority: int = 0, lora", "lora")(files)
    broken = write_tree(tmp_path / "prov-1.2", files)
    found = run_audit(consumer, broken, baseline, engine=engine).findings
    assert [(f.kind, f.symbol, f.detail) for f in found] == [
        (Kind.UNEXPECTED_ARGUMENT, "prov.request.make_request", "priority")
    ]


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_each_harmless_change_applies(name: str) -> None:
    """Guard for the test above: every listed change really changes the provider."""
    files = dict(BASE_PROVIDER)
    HARMLESS[name](files)
    assert files != BASE_PROVIDER
