"""A stand-in speculators and vLLM in a site-packages folder: real code raising real errors,
for running the real extract.py without vLLM.

The generator's ``mode``: 0 builds, then ``generate`` calls vLLM's Request wrongly (TypeError
in vLLM); 1 and 2 call a vLLM function wrongly or into a raise while building; 3 builds and
``generate`` returns every prompt's ids and, per layer, a ``[tokens, 2]`` tensor filled with
``layer index + prompt length``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FAKE_PACKAGES = {
    "vllm/__init__.py": "",
    "vllm/v1/__init__.py": "",
    "vllm/v1/core/__init__.py": "",
    "vllm/v1/core/kv_cache_utils.py": """\
        def get_kv_cache_config_from_groups(vllm_config, kv_cache_groups, available_memory):
            return _check_layout(vllm_config)


        def _check_layout(vllm_config):
            raise ValueError("KV cache layout has not been resolved yet")
        """,
    "vllm/v1/request.py": """\
        class Request:
            def __init__(self, request_id, prompt_token_ids=None):
                self.request_id = request_id
        """,
    "speculators/__init__.py": "",
    "speculators/data_generation/__init__.py": "",
    "speculators/data_generation/vllm_hidden_states_generator.py": """\
        import torch
        from vllm.v1.core.kv_cache_utils import get_kv_cache_config_from_groups
        from vllm.v1.request import Request


        class _Config:
            def __init__(self, **fields):
                self.__dict__.update(fields)


        class _Executor:
            def collective_rpc(self, method):
                return []

            def shutdown(self):
                pass


        class VllmHiddenStatesGenerator:
            def __init__(self, model_path, layer_ids=None, mode=0):
                self.layer_ids = layer_ids
                self.mode = mode
                self.executor = _Executor()
                self.vllm_config = _Config(
                    scheduler_config=_Config(max_num_batched_tokens=8192),
                    parallel_config=_Config(tensor_parallel_size=1),
                    model_config=_Config(dtype="float32", max_model_len=64, enforce_eager=True),
                    cache_config=_Config(gpu_memory_utilization=0.1, enable_prefix_caching=False),
                    compilation_config=_Config(),
                    device_config=_Config(device="cpu"),
                )
                if mode == 1:
                    get_kv_cache_config_from_groups(
                        vllm_config=None, kv_cache_groups=[], kv_cache_specs={}, available_memory=0
                    )
                if mode == 2:
                    get_kv_cache_config_from_groups(None, [], 0)

            def generate(self, token_ids):
                if self.mode == 3:
                    return [
                        {
                            "input_ids": torch.tensor(ids),
                            "hidden_states": [
                                torch.full((len(ids), 2), float(k + len(ids)))
                                for k in range(len(self.layer_ids))
                            ],
                        }
                        for ids in token_ids
                    ]
                return [Request(request_id="r0", eos_token_id=2)]
        """,
}


def fake_site(root: Path) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    for rel, text in FAKE_PACKAGES.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return site
