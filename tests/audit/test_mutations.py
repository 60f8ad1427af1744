"""Mutation suite: a small provider made here, mutants of it, and a consumer that uses it.

Each mutant changes the provider the way vLLM changed between releases; the audit of the
unchanged consumer against the mutant (baseline: the original provider) must report exactly
that drift, at the consumer line that breaks, with the provider symbol and both locations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from patchwheel.audit import AuditReport, Finding, Kind, MypyEngine, run_audit
from tests.audit._sample import CONSUMER, PROVIDER, at, line_of, write_tree


def _edit(relative: str, old: str, new: str) -> Callable[[dict[str, str]], None]:
    def apply(files: dict[str, str]) -> None:
        assert old in files[relative], f"mutant does not apply: {old!r} not in {relative}"
        files[relative] = files[relative].replace(old, new)

    return apply


def _move(relative: str, to: str) -> Callable[[dict[str, str]], None]:
    def apply(files: dict[str, str]) -> None:
        files[to] = files.pop(relative)

    return apply


@pytest.fixture(scope="module")
def consumer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("consumer"), CONSUMER)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("provider-1.0"), PROVIDER)


def audit_mutant(
    tmp_path: Path,
    consumer: Path,
    baseline: Path,
    engine: MypyEngine,
    *mutations: Callable[[dict[str, str]], None],
) -> AuditReport:
    files = dict(PROVIDER)
    for mutate in mutations:
        mutate(files)
    mutant = write_tree(tmp_path / "provider-mutant", files)
    return run_audit(consumer, mutant, baseline, engine=engine)


def only(report: AuditReport) -> Finding:
    assert len(report.findings) == 1, [(f.kind, f.symbol, f.message) for f in report.findings]
    return report.findings[0]


GENERATOR = "src/cons/generator.py"


def test_renamed_inherited_method_through_attribute_typed_by_assignment(
    tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine
) -> None:
    rename = _edit(
        "prov/executor/abstract.py", "def initialize_from_config", "def initialize_from_kv_configs"
    )
    finding = only(audit_mutant(tmp_path, consumer, baseline, engine, rename))
    assert finding.kind is Kind.MISSING_ATTRIBUTE
    assert finding.symbol == "prov.executor.multiproc.MultiprocExecutor.initialize_from_config"
    assert (
        finding.location == f"{GENERATOR}:{line_of(consumer / GENERATOR, 'initialize_from_config')}"
    )
    assert finding.source == "self.executor.initialize_from_config([kv])"
    # Old: the inherited definition on the base class; new: the class that now lacks it.
    assert finding.old is not None
    assert finding.old.symbol == "prov.executor.abstract.Executor.initialize_from_config"
    assert finding.old.location == at("prov/executor/abstract.py", "def initialize_from_config")
    assert finding.old.render() == "initialize_from_config(kv_cache_configs: list[int]) -> None"
    assert not finding.new.exists
    assert finding.new.location == at("prov/executor/multiproc.py", "class MultiprocExecutor")


def test_renamed_keyword_in_an_override(
    tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine
) -> None:
    rename = _edit(
        "prov/executor/multiproc.py",
        "def collective_rpc(self, method: str,",
        "def collective_rpc(self, name: str,",
    )
    finding = only(audit_mutant(tmp_path, consumer, baseline, engine, rename))
    assert finding.kind is Kind.UNEXPECTED_ARGUMENT
    assert finding.detail == "method"
    assert finding.symbol == "prov.executor.multiproc.MultiprocExecutor.collective_rpc"
    assert finding.line == line_of(consumer / GENERATOR, "collective_rpc(method=")
    assert finding.new.location == at("prov/executor/multiproc.py", "def collective_rpc")
    assert finding.changes == ("parameter method removed", "new required parameter name")


def test_moved_module(tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine) -> None:
    move = _move("prov/sequence.py", "prov/worker/sequence.py")
    package = _edit("prov/__init__.py", "", "")
    report = audit_mutant(tmp_path, consumer, baseline, engine, move, package)
    finding = only(report)
    assert finding.kind is Kind.MISSING_MODULE
    assert finding.symbol == "prov.sequence"
    assert finding.detail == "IntermediateTensors"
    assert finding.location == "src/cons/worker.py:1"
    assert finding.old is not None and finding.old.location == at(
        "prov/sequence.py", "class IntermediateTensors"
    )
    assert finding.hints == ("IntermediateTensors: prov/worker/sequence.py:1",)


def test_renamed_enum_member(
    tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine
) -> None:
    rename = _edit("prov/request.py", "FINISHED_ABORTED = ", "FINISHED_ABORT = ")
    finding = only(audit_mutant(tmp_path, consumer, baseline, engine, rename))
    assert finding.kind is Kind.MISSING_ATTRIBUTE
    assert finding.symbol == "prov.request.RequestStatus.FINISHED_ABORTED"
    assert finding.line == line_of(consumer / GENERATOR, "RequestStatus.FINISHED_ABORTED")
    assert finding.old is not None and finding.old.location == at(
        "prov/request.py", "FINISHED_ABORTED ="
    )
    assert finding.new.location == at("prov/request.py", "class RequestStatus")


def test_renamed_field_of_a_returned_object(
    tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine
) -> None:
    rename = _edit("prov/sched.py", "total_num_scheduled_tokens: int", "num_tokens: int")
    finding = only(audit_mutant(tmp_path, consumer, baseline, engine, rename))
    assert finding.kind is Kind.MISSING_ATTRIBUTE
    assert finding.symbol == "prov.sched.SchedulerOutput.total_num_scheduled_tokens"
    assert finding.line == line_of(consumer / GENERATOR, "return out.total_num_scheduled_tokens")
    assert finding.old is not None and finding.old.render() == "total_num_scheduled_tokens: int"


def test_parameter_made_keyword_only(
    tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine
) -> None:
    # The consumer's own `# type: ignore` on that line must not hide the drift.
    keyword_only = _edit(
        "prov/sched.py", "groups: list[int], available", "groups: list[int], *, available"
    )
    finding = only(audit_mutant(tmp_path, consumer, baseline, engine, keyword_only))
    assert finding.kind is Kind.TOO_MANY_ARGUMENTS
    assert finding.symbol == "prov.sched.get_kv_cache_config"
    assert finding.line == line_of(consumer / GENERATOR, "get_kv_cache_config(self.config")
    assert finding.changes == ("parameter available_memory became keyword-only",)
    assert finding.new.render() == (
        "get_kv_cache_config(config: SchedConfig, groups: list[int], *, available_memory: int)"
        " -> int"
    )


def test_new_required_parameter(
    tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine
) -> None:
    required = _edit(
        "prov/sched.py",
        "kv_cache_config: int) -> None:",
        "kv_cache_config: int, block_size: int) -> None:",
    )
    finding = only(audit_mutant(tmp_path, consumer, baseline, engine, required))
    assert finding.kind is Kind.MISSING_ARGUMENT
    assert finding.symbol == "prov.sched.Scheduler"
    assert finding.detail == "block_size"
    assert finding.source == "self.scheduler = Scheduler(self.config, kv)"
    assert finding.old is not None and finding.old.location == at(
        "prov/sched.py", "class Scheduler:"
    )
    assert finding.new.location == at("prov/sched.py", "class Scheduler:")
    assert finding.changes == ("new required parameter block_size",)


def test_removed_keyword_and_renamed_function(
    tmp_path: Path, consumer: Path, baseline: Path, engine: MypyEngine
) -> None:
    removed = _edit("prov/request.py", ", eos_token_id: int | None = None", "")
    renamed = _edit(
        "prov/sched.py", "def get_kv_cache_config(", "def get_kv_cache_config_from_groups("
    )
    report = audit_mutant(tmp_path, consumer, baseline, engine, removed, renamed)
    found = {(f.kind, f.symbol, f.detail) for f in report.findings}
    assert found == {
        (Kind.UNEXPECTED_ARGUMENT, "prov.request.Request", "eos_token_id"),
        (Kind.MISSING_NAME, "prov.sched.get_kv_cache_config", "get_kv_cache_config"),
    }
    missing = next(f for f in report.findings if f.kind is Kind.MISSING_NAME)
    assert missing.hints == ()  # renamed, not moved: no definition of that name remains
    assert missing.new.location == "prov/sched.py"


def test_error_already_present_at_baseline_is_a_blind_spot(
    tmp_path: Path, baseline: Path, engine: MypyEngine
) -> None:
    files = dict(CONSUMER)
    files["src/cons/broken.py"] = """
        from prov.config import SchedConfig
        from prov.sched import Scheduler

        too_many = Scheduler(SchedConfig(), 1, 2, 3)
        too_few = Scheduler(SchedConfig())
        """
    consumer = write_tree(tmp_path / "consumer", files)
    required = _edit(
        "prov/sched.py", "kv_cache_config: int)", "kv_cache_config: int, block_size: int)"
    )
    report = audit_mutant(tmp_path, consumer, baseline, engine, required)
    # Drift on calls that worked, and the argument newly missing on a call already missing one.
    assert sorted((f.location, f.detail) for f in report.findings) == [
        ("src/cons/broken.py:5", "block_size"),
        (f"{GENERATOR}:{line_of(consumer / GENERATOR, 'Scheduler(self.config')}", "block_size"),
    ]
    # The same error at both versions: the audit cannot judge that call.
    assert [(b.location, b.symbol, b.baseline_line) for b in report.blind_spots] == [
        ("src/cons/broken.py:4", "prov.sched.Scheduler", 4)
    ]
