"""`kvplug`: a vLLM plugin written for vLLM 0.26, the way hs-connectors is written.

It subclasses vLLM's own classes and is named by string, so between vLLM 0.26 and 0.33 it meets
every kind of contract drift that really happened there (read from the two releases' sources):

- ``CrossLayerConnector`` (``KVConnectorBase_V1`` + ``SupportsHMA``) overrides the cross-layer
  hooks vLLM 0.31 removed (``prefer_cross_layer_blocks``, ``register_cross_layers_kv_cache``)
  and calls the private ``_get_connector_metadata``; it is named by
  ``kv_connector_module_path``, so vLLM builds it itself (its ``__init__`` is judged);
- ``FileConnector`` (``ExampleHiddenStatesConnector``) overrides the private ``_write_tensors``
  and a public hook, both unchanged;
- ``LRUPolicy`` (``CachePolicy``): 0.33 renamed ``insert``'s ``block`` to ``chunk`` and added
  ``req_context``; ``PushWorker`` (``OffloadingWorker``): 0.33 added ``expedited`` to
  ``submit_load``;
- ``AsyncOutput`` (``AsyncModelRunnerOutput``): 0.33 added the abstract
  ``get_kv_connector_output``;
- ``Extension``, its worker extension: 0.33's worker gained ``reset_weights``, which the
  extension defines too; ``collective_rpc("_get_sleep_mode_backend")`` names a worker method
  0.33 removed; one connector name and one rpc method are not literals (blind spots).
"""

from __future__ import annotations

CONNECTOR = """
from typing import Any

import torch
from vllm.config import VllmConfig
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    SupportsHMA,
)
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector,
)


class FileConnector(ExampleHiddenStatesConnector):
    def wait_for_save(self) -> None:
        super().wait_for_save()

    @staticmethod
    def _write_tensors(
        tensors: dict[str, torch.Tensor],
        event: torch.cuda.Event,
        filename: str,
        lock_fd: int | None,
    ) -> None:
        event.synchronize()


class CrossLayerConnector(KVConnectorBase_V1, SupportsHMA):
    def __init__(
        self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: Any
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        self.cross: torch.Tensor | None = None

    @property
    def prefer_cross_layer_blocks(self) -> bool:
        return True

    def register_cross_layers_kv_cache(self, kv_cache: torch.Tensor, attn_backend: Any) -> None:
        self.cross = kv_cache

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None: ...

    def wait_for_layer_load(self, layer_name: str) -> None: ...

    def save_kv_layer(
        self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: Any, **kwargs: Any
    ) -> None: ...

    def wait_for_save(self) -> None: ...

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        self._get_connector_metadata()
        return None, None

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        return 0, False

    def update_state_after_alloc(
        self, request: Any, blocks: Any, num_external_tokens: int
    ) -> None: ...

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        return KVConnectorMetadata()

    def request_finished_all_groups(
        self, request: Any, block_ids: tuple[list[int], ...]
    ) -> tuple[bool, dict[str, Any] | None]:
        return False, None


def kv_transfer_config(name: str) -> list[dict[str, str]]:
    return [
        {"kv_connector": "CrossLayerConnector", "kv_connector_module_path": "kvplug.connector"},
        {"kv_connector": "ExampleHiddenStatesConnector", "kv_role": "kv_producer"},
        {"kv_connector": name, "kv_role": "kv_both"},
    ]
"""

OFFLOAD = """
from collections.abc import Iterable
from typing import Any

from vllm.v1.kv_offload.base import OffloadingWorker
from vllm.v1.kv_offload.cpu.policies.base import CachePolicy
from vllm.v1.outputs import AsyncModelRunnerOutput


class LRUPolicy(CachePolicy):
    def __init__(self, cache_capacity: int) -> None:
        self.blocks: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self.blocks.get(key)

    def insert(self, key: Any, block: Any) -> None:
        self.blocks[key] = block

    def remove(self, key: Any) -> None:
        self.blocks.pop(key, None)

    def touch(self, keys: Iterable[Any], req_context: Any) -> None: ...

    def evict(self, n: int, protected: set[Any]) -> list[tuple[Any, Any]] | None:
        return None

    def clear(self) -> None:
        self.blocks.clear()


class PushWorker(OffloadingWorker):
    def submit_store(self, job_id: int, src_spec: Any, dst_spec: Any) -> bool:
        return True

    def submit_load(self, job_id: int, src_spec: Any, dst_spec: Any) -> bool:
        return True

    def get_finished(self) -> list[Any]:
        return []

    def wait(self, job_ids: set[int]) -> None: ...


class AsyncOutput(AsyncModelRunnerOutput):
    def get_output(self) -> Any:
        return None
"""

WORKER = """
from typing import Any


class Extension:
    def reset_weights(self) -> None:
        self.weights = None

    def capture(self) -> list[int]:
        return []


def run(llm: Any, method: str) -> None:
    llm.collective_rpc("capture")
    llm.collective_rpc("get_kv_cache_spec")
    llm.collective_rpc("_get_sleep_mode_backend")
    llm.collective_rpc(method)


ENGINE = {"worker_extension_cls": "kvplug.worker.Extension"}
"""

KVPLUG = {
    "pyproject.toml": '[project]\nname = "kvplug"\nversion = "0.1"\n',
    "kvplug/__init__.py": "",
    "kvplug/connector.py": CONNECTOR,
    "kvplug/offload.py": OFFLOAD,
    "kvplug/worker.py": WORKER,
}
