"""The plugin contract on real source trees the tests write: a provider's hooks at two versions
and a plugin written for the first (see `_contract_sample`), checked by the real mypy engine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from patchwheel.audit import AuditReport, Consumer, Kind, MypyEngine, audit_runs, run_audit
from patchwheel.audit.engine import CheckRequest, CheckResult, Member, Param
from patchwheel.audit.overrides import problems
from tests.audit import _contract_sample as sample
from tests.audit._sample import line_of, write_tree

PLUGIN = "src/plug/connector.py"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("contract")
    return {
        "plug": write_tree(base / "plug", sample.CONSUMER),
        "1.0": write_tree(base / "prov-1.0", sample.provider("1.0")),
        "2.0": write_tree(base / "prov-2.0", sample.provider("2.0")),
    }


@pytest.fixture(scope="module")
def drift(trees: dict[str, Path], engine: MypyEngine) -> AuditReport:
    return run_audit(trees["plug"], trees["2.0"], trees["1.0"], engine=engine, rules=sample.RULES)


def at(trees: dict[str, Path], snippet: str) -> str:
    return f"{PLUGIN}:{line_of(trees['plug'] / PLUGIN, snippet)}"


def test_every_kind_of_contract_drift_names_the_class_the_base_and_both_signatures(
    drift: AuditReport, trees: dict[str, Path]
) -> None:
    found = {(f.kind, f.location, f.symbol, f.detail) for f in drift.findings}
    assert found == {
        (Kind.OVERRIDE_SIGNATURE, at(trees, "def save"), "prov.hooks.Connector.save", "meta"),
        (Kind.OVERRIDE_SIGNATURE, at(trees, "def load"), "prov.hooks.Connector.load", "new_name"),
        (Kind.OVERRIDE_SIGNATURE, at(trees, "def flush"), "prov.hooks.Connector.flush", "force"),
        (
            Kind.OVERRIDE_SIGNATURE,
            at(trees, "def close"),
            "prov.hooks.Connector.close",
            "timeout, seconds",
        ),
        (
            Kind.DEAD_OVERRIDE,
            at(trees, "def prefer_blocks"),
            "prov.hooks.Connector.prefer_blocks",
            "prefer_blocks",
        ),
        (
            Kind.DEAD_OVERRIDE,
            at(trees, "def register_blocks"),
            "prov.hooks.Connector.register_blocks",
            "register_blocks",
        ),
        (
            Kind.MISSING_ABSTRACT,
            at(trees, "class MyConnector"),
            "prov.hooks.Connector.shutdown",
            "shutdown",
        ),
        (Kind.PRIVATE_API, at(trees, "def _cleanup"), "prov.hooks.Connector._cleanup", "_cleanup"),
        (Kind.OVERRIDE_SIGNATURE, at(trees, "def reset"), "prov.hooks.Connector.reset", "hard"),
        (
            Kind.UNRESOLVED_NAME,
            at(trees, '"FileConnector"'),
            "prov.shared.FileConnector",
            "FileConnector",
        ),
        (
            Kind.MISSING_ARGUMENT,
            at(trees, '"load_model"'),
            "prov.worker.Worker.load_model",
            "revision",
        ),
        (Kind.UNRESOLVED_NAME, at(trees, '"sleep"'), "prov.worker.Worker.sleep", "sleep"),
        (
            Kind.NAME_CONFLICT,
            at(trees, "worker_extension_cls"),
            "prov.worker.Worker.capture",
            "capture",
        ),
    }
    assert drift.exit_status == 1
    by_kind_detail = {(f.kind, f.detail): f for f in drift.findings}

    save = by_kind_detail[Kind.OVERRIDE_SIGNATURE, "meta"]
    assert save.message.startswith("MyConnector.save overrides Connector.save")
    assert "does not accept meta (required in the base)" in save.message
    assert save.override == "MyConnector.save(layer: str, tensor: object) -> None"
    assert save.old is not None and save.old.render() == "save(layer: str, tensor: object) -> None"
    assert save.new.render() == "save(layer: str, tensor: object, meta: dict[str, int]) -> None"
    assert save.new.location == "prov/hooks.py:11"
    assert save.changes == ("new required parameter meta",)

    load = by_kind_detail[Kind.OVERRIDE_SIGNATURE, "new_name"]
    assert "does not accept new_name by name" in load.message
    assert "its parameter 2 is old_name" in load.message
    assert load.changes == ("parameter old_name removed", "new required parameter new_name")

    flush = by_kind_detail[Kind.OVERRIDE_SIGNATURE, "force"]
    assert "does not accept force (required in the base)" in flush.message
    assert flush.changes == ("parameter force lost its default",)

    close = by_kind_detail[Kind.OVERRIDE_SIGNATURE, "timeout, seconds"]
    assert "does not accept keyword timeout" in close.message
    assert "requires seconds, which the base does not declare" in close.message
    assert close.changes == ("parameter timeout became keyword-only",)

    gone = by_kind_detail[Kind.DEAD_OVERRIDE, "prefer_blocks"]
    assert "the provider never calls it" in gone.message
    assert gone.old is not None and gone.old.location == "prov/hooks.py:25"
    assert not gone.new.exists and gone.hints == ()
    renamed = by_kind_detail[Kind.DEAD_OVERRIDE, "register_blocks"]
    assert "renamed to register_kv_blocks?" in " ".join(renamed.changes)
    assert renamed.hints == ("register_kv_blocks: prov/hooks.py:24",)

    reset = by_kind_detail[Kind.OVERRIDE_SIGNATURE, "hard"]
    assert "(Connector gained reset since the baseline)" in reset.message
    assert reset.old is None and reset.new.render() == "reset(hard: bool) -> None"

    abstract = by_kind_detail[Kind.MISSING_ABSTRACT, "shutdown"]
    assert "cannot instantiate" in abstract.message
    assert abstract.new.render() == "shutdown() -> None"

    rpc = by_kind_detail[Kind.MISSING_ARGUMENT, "revision"]
    assert (
        rpc.new.render() == "load_model(path: str, revision: str, *, strict: bool = True) -> None"
    )
    conflict = by_kind_detail[Kind.NAME_CONFLICT, "capture"]
    assert conflict.new.location == "prov/worker.py:9"


def test_what_already_held_at_baseline_is_listed_not_failed(drift: AuditReport) -> None:
    # `start` names its parameter differently at both versions: pre-existing, not new drift.
    spots = {(b.kind, b.symbol) for b in drift.blind_spots}
    assert spots == {
        (Kind.OVERRIDE_SIGNATURE, "prov.hooks.Connector.start"),
        (Kind.DYNAMIC_NAME, "collective_rpc"),
    }
    assert {(u.use, u.name) for u in drift.private} == {("override", "_write"), ("call", "_state")}
    cov = drift.coverage
    # Eleven overrides judged at 2.0 (__init__ among them: the provider builds the connector it
    # is named by; the dead ones are none), one class; the class path, the module-path
    # connector, the one the plugin registers itself and the JSON one resolve, FileConnector
    # no longer.
    assert (cov.overrides, cov.classes, cov.named, cov.rpc) == (11, 1, 4, 3)
    data = drift.to_dict()
    assert {u["location"] for u in data["private_api"]} == {u.location for u in drift.private}
    assert data["coverage"]["overrides"] == 11


def test_a_plugin_against_its_own_release_has_no_finding(
    trees: dict[str, Path], engine: MypyEngine
) -> None:
    report = run_audit(trees["plug"], trees["1.0"], trees["1.0"], engine=engine, rules=sample.RULES)
    assert report.findings == []
    assert report.exit_status == 0
    # prefer_blocks and register_blocks are overrides here, _cleanup, describe and reset not.
    assert report.coverage.overrides == 10
    assert report.coverage.named == 5 and report.coverage.rpc == 4


class CountingEngine:
    """The real engine, counting the requests it is asked to check."""

    def __init__(self, engine: MypyEngine) -> None:
        self.engine = engine
        self.name, self.version = engine.name, engine.version
        self.requests: list[CheckRequest] = []

    def check(self, requests: Sequence[CheckRequest]) -> list[CheckResult]:
        self.requests += requests
        return self.engine.check(requests)


def test_several_consumers_are_checked_together_with_a_report_each(
    trees: dict[str, Path], engine: MypyEngine, tmp_path: Path
) -> None:
    # A second plugin subclasses the first's connector: its override is judged against the
    # provider's base (the class between is the consumer's), which it only sees when both
    # consumers are checked together.
    second = write_tree(
        tmp_path / "plug2",
        {
            "pyproject.toml": '[project]\nname = "plug2"\nversion = "0.1"\n',
            "plug2/__init__.py": "",
            "plug2/derived.py": """
                from plug.connector import MyConnector


                class Derived(MyConnector):
                    def save(self, layer: str, tensor: object) -> None: ...
                """,
        },
    )
    counting = CountingEngine(engine)
    runs = audit_runs(
        [Consumer(trees["plug"], label="plug"), Consumer(second, label="plug2")],
        trees["2.0"],
        trees["1.0"],
        engine=counting,
        rules=sample.RULES,
    )
    assert len(counting.requests) == 2  # one check per provider tree, for both consumers
    first, other = (run.report for run in runs)
    assert (first.consumer.label, other.consumer.label) == ("plug", "plug2")
    assert {f.path for f in first.findings} == {PLUGIN}
    assert {(f.kind, f.location, f.symbol) for f in other.findings} == {
        (Kind.OVERRIDE_SIGNATURE, "plug2/derived.py:5", "prov.hooks.Connector.save"),
        (Kind.MISSING_ABSTRACT, "plug2/derived.py:4", "prov.hooks.Connector.shutdown"),
    }
    save = next(f for f in other.findings if f.kind is Kind.OVERRIDE_SIGNATURE)
    assert save.message.startswith("Derived.save overrides Connector.save")
    assert other.coverage.files == 2 and first.coverage.files == 2


def _member(binding: str, *params: Param) -> Member:
    return Member("prov.Base.hook", binding, params)


def _p(name: str, kind: str = "positional-or-keyword", default: str | None = None) -> Param:
    return Param(name, kind, None, default)


@pytest.mark.parametrize(
    ("own", "base", "keys"),
    [
        # Same parameters: compatible.
        (_member("instance", _p("a"), _p("b")), _member("instance", _p("a"), _p("b")), []),
        # *args/**kwargs accept anything the base passes.
        (
            _member("instance", _p("args", "var-positional"), _p("kw", "var-keyword")),
            _member("instance", _p("a"), _p("b", "keyword-only")),
            [],
        ),
        # A base *args/**kwargs the override lacks.
        (
            _member("instance", _p("a")),
            _member("instance", _p("a"), _p("rest", "var-positional"), _p("kw", "var-keyword")),
            ["var-positional", "var-keyword"],
        ),
        # Positional-only in the base: any name at that position will do.
        (_member("instance", _p("x")), _member("instance", _p("", "positional-only")), []),
        # The override reorders two parameters.
        (
            _member("instance", _p("b"), _p("a")),
            _member("instance", _p("a"), _p("b")),
            ["position a 0", "position b 1"],
        ),
        # The override takes by name only what the base passes by position.
        (
            _member("instance", _p("a", "keyword-only")),
            _member("instance", _p("a")),
            ["keyword-only a"],
        ),
        # An optional parameter of the base the override requires.
        (
            _member("instance", _p("a")),
            _member("instance", _p("a", default="1")),
            ["required a"],
        ),
        # The provider calls a classmethod on the class; a property is no method.
        (_member("instance"), _member("class"), ["binding class instance"]),
        (_member("instance"), _member("property"), ["binding property instance"]),
        (_member("property"), _member("attribute"), []),
    ],
)
def test_what_an_override_must_accept(own: Member, base: Member, keys: list[str]) -> None:
    assert [p.key for p in problems(own, base)] == keys
