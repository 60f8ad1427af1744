"""The plugin contract on real vLLM sources: a plugin the test writes for vLLM 0.26 (`_kvplug`)
audited against 0.33, and hs-connectors 0.9.0 (a real plugin from the package index: it
subclasses KVConnectorBase_V1 + SupportsHMA and ExampleHiddenStatesConnector, overrides the
private ``_write_tensors``, and is named by ``kv_connector_module_path``).

Source trees are vLLM's release sdists (hash-checked and cached by
`patchwheel.upstream.sources`); nothing is installed or imported. Marked `network` as
test_speculators is (the sdists are ~45 MB each; offline once cached).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.audit import AuditReport, Kind, MypyEngine, audit_consumers, run_audit
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree
from tests.audit._kvplug import KVPLUG
from tests.audit._sample import line_of, write_tree

pytestmark = pytest.mark.network

BASE = "vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1"
EXAMPLE = (
    "vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector"
    ".ExampleHiddenStatesConnector"
)
MOONCAKE = "src/hs_connectors/mooncake_hidden_states_connector.py"


@pytest.fixture(scope="module")
def trees(shared_cache: Cache, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pins = ["vllm==0.26.0", "vllm==0.31.0", "vllm==0.33.0"]
    pins += ["hs-connectors==0.9.0", "speculators==0.9.0"]
    found = {pin: source_tree(pin, shared_cache) for pin in pins}
    found["kvplug"] = write_tree(tmp_path_factory.mktemp("kvplug"), KVPLUG)
    return found


@pytest.fixture(scope="module")
def kvplug_drift(trees: dict[str, Path], engine: MypyEngine) -> AuditReport:
    return run_audit(
        trees["kvplug"],
        trees["vllm==0.33.0"],
        trees["vllm==0.26.0"],
        labels=("kvplug", "vllm==0.33.0", "vllm==0.26.0"),
        engine=engine,
    )


def at(trees: dict[str, Path], path: str, snippet: str) -> str:
    return f"{path}:{line_of(trees['kvplug'] / path, snippet)}"


def test_a_plugin_written_for_vllm_0_26_meets_every_drift_of_0_33(
    kvplug_drift: AuditReport, trees: dict[str, Path]
) -> None:
    report = kvplug_drift
    connector, offload, worker = "kvplug/connector.py", "kvplug/offload.py", "kvplug/worker.py"
    assert {(f.kind, f.location, f.symbol, f.detail) for f in report.findings} == {
        (
            Kind.DEAD_OVERRIDE,
            at(trees, connector, "def prefer_cross_layer_blocks"),
            f"{BASE}.prefer_cross_layer_blocks",
            "prefer_cross_layer_blocks",
        ),
        (
            Kind.DEAD_OVERRIDE,
            at(trees, connector, "def register_cross_layers_kv_cache"),
            f"{BASE}.register_cross_layers_kv_cache",
            "register_cross_layers_kv_cache",
        ),
        (
            Kind.OVERRIDE_SIGNATURE,
            at(trees, offload, "def insert"),
            "vllm.v1.kv_offload.cpu.policies.base.CachePolicy.insert",
            "chunk, req_context",
        ),
        (
            Kind.OVERRIDE_SIGNATURE,
            at(trees, offload, "def submit_load"),
            "vllm.v1.kv_offload.base.OffloadingWorker.submit_load",
            "expedited",
        ),
        (
            Kind.MISSING_ABSTRACT,
            at(trees, offload, "class AsyncOutput"),
            "vllm.v1.outputs.AsyncModelRunnerOutput.get_kv_connector_output",
            "get_kv_connector_output",
        ),
        (
            Kind.UNRESOLVED_NAME,
            at(trees, worker, '"_get_sleep_mode_backend"'),
            "vllm.v1.worker.gpu_worker.Worker._get_sleep_mode_backend",
            "_get_sleep_mode_backend",
        ),
        (
            Kind.NAME_CONFLICT,
            at(trees, worker, "worker_extension_cls"),
            "vllm.v1.worker.gpu_worker.Worker.reset_weights",
            "reset_weights",
        ),
    }
    found = {(f.kind, f.detail): f for f in report.findings}
    insert = found[Kind.OVERRIDE_SIGNATURE, "chunk, req_context"]
    assert insert.message.startswith("LRUPolicy.insert overrides CachePolicy.insert")
    assert insert.override == "LRUPolicy.insert(key: Any, block: Any) -> None"
    assert insert.old is not None
    assert insert.old.render() == "insert(key: OffloadKey, block: BlockStatus) -> None"
    assert insert.new.render() == (
        "insert(key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None"
    )
    assert insert.new.location == "vllm/v1/kv_offload/cpu/policies/base.py:62"
    assert "new required parameter req_context" in insert.changes
    load = found[Kind.OVERRIDE_SIGNATURE, "expedited"]
    assert "does not accept expedited (optional in the base)" in load.message
    assert load.changes == ("new optional parameter expedited",)
    cross = found[Kind.DEAD_OVERRIDE, "prefer_cross_layer_blocks"]
    assert cross.old is not None
    assert cross.old.location == "vllm/distributed/kv_transfer/kv_connector/v1/base.py:177"
    assert not cross.new.exists
    # 0.33 gained unregister_kv_caches: no evident rename of register_cross_layers_kv_cache.
    hook = found[Kind.DEAD_OVERRIDE, "register_cross_layers_kv_cache"]
    assert not any("renamed" in change for change in hook.changes)
    abstract = found[Kind.MISSING_ABSTRACT, "get_kv_connector_output"]
    assert abstract.new.location == "vllm/v1/outputs.py:365"

    # Held at 0.26 already, or not resolvable statically: listed, never dropped.
    assert {(b.kind, b.location) for b in report.blind_spots} == {
        (Kind.DYNAMIC_NAME, at(trees, connector, '{"kv_connector": name')),
        (Kind.DYNAMIC_NAME, at(trees, worker, "llm.collective_rpc(method)")),
    }
    assert {(u.use, u.name) for u in report.private} == {
        ("override", "_write_tensors"),
        ("call", "_get_connector_metadata"),
    }
    cov = report.coverage
    assert (cov.overrides, cov.classes, cov.named, cov.rpc) == (23, 5, 3, 2)


def test_the_plugin_against_its_own_release_has_no_finding(
    trees: dict[str, Path], engine: MypyEngine
) -> None:
    report = run_audit(trees["kvplug"], trees["vllm==0.26.0"], trees["vllm==0.26.0"], engine=engine)
    assert report.findings == []
    assert report.coverage.overrides == 25  # the two cross-layer hooks are live at 0.26


def test_hs_connectors_holds_at_its_own_vllm_and_at_0_33(
    trees: dict[str, Path], engine: MypyEngine
) -> None:
    """hs-connectors 0.9.0 (2026-10-16) was released against vLLM 0.31.0 (2026-10-05)."""
    hs = trees["hs-connectors==0.9.0"]
    own = run_audit(hs, trees["vllm==0.31.0"], trees["vllm==0.31.0"], engine=engine)
    assert own.findings == [] and own.blind_spots == []
    # Both consumers of a speculators 0.9 target, checked together against 0.33 (baseline
    # 0.31): one report each, no new drift. speculators 0.9 talks to vLLM over HTTP only.
    speculators, connectors = audit_consumers(
        [trees["speculators==0.9.0"], hs],
        trees["vllm==0.33.0"],
        trees["vllm==0.31.0"],
        engine=engine,
    )
    assert connectors.findings == [] and connectors.exit_status == 0
    assert speculators.findings == [] and speculators.coverage.calls == 0
    cov = connectors.coverage
    # FP8's _write_tensors; Mooncake's __init__ (vLLM builds it from its module path) and 12
    # hooks; ExampleHiddenStatesConnector from vLLM's registry and the two module paths.
    assert (cov.overrides, cov.classes, cov.named, cov.rpc) == (14, 3, 3, 0)
    assert len(connectors.private) == 6  # as docs/explanation/audit.md says
    assert {(u.use, u.name) for u in connectors.private} == {
        ("override", "_write_tensors"),
        ("read", "_vllm_config"),
        ("read", "_kv_transfer_config"),
        ("call", "_get_connector_metadata"),
    }
    write = next(u for u in connectors.private if u.name == "_write_tensors")
    assert write.symbol == f"{EXAMPLE}._write_tensors"


def test_hs_connectors_since_vllm_0_26_has_one_dead_hook(
    trees: dict[str, Path], engine: MypyEngine
) -> None:
    hs = trees["hs-connectors==0.9.0"]
    report = run_audit(hs, trees["vllm==0.33.0"], trees["vllm==0.26.0"], engine=engine)
    (dead,) = report.findings
    line = line_of(hs / MOONCAKE, "def prefer_cross_layer_blocks")
    assert (dead.kind, dead.location, dead.symbol) == (
        Kind.DEAD_OVERRIDE,
        f"{MOONCAKE}:{line}",
        f"{BASE}.prefer_cross_layer_blocks",
    )
    assert dead.message.startswith(
        "MooncakeHiddenStatesConnector.prefer_cross_layer_blocks overrides "
        "KVConnectorBase_V1.prefer_cross_layer_blocks"
    )
    assert dead.override == "MooncakeHiddenStatesConnector.prefer_cross_layer_blocks: bool"
