"""A small provider (`prov`) and a consumer (`cons`) that calls it, as real source trees.

The provider imitates the parts of vLLM that speculators uses: a dataclass config, a request
with an enum status, a scheduler returning a dataclass, an executor whose methods are
inherited and overridden, a module holding one class.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    """Write `files` (relative path -> source) under `root`; return `root`."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def line_of(path: Path, snippet: str) -> int:
    """The 1-based line of the only line of `path` containing `snippet`."""
    hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if snippet in line]
    assert len(hits) == 1, f"{snippet!r} occurs {len(hits)} times in {path}"
    return hits[0]


PROVIDER = {
    "pyproject.toml": """
        [project]
        name = "prov"
        version = "1.0"
        dependencies = ["torch"]
        """,
    "prov/__init__.py": "",
    "prov/config.py": """
        from dataclasses import dataclass


        @dataclass
        class SchedConfig:
            max_seqs: int = 8
            block_size: int = 16
        """,
    "prov/request.py": """
        import enum


        class RequestStatus(enum.IntEnum):
            WAITING = enum.auto()
            FINISHED_ABORTED = enum.auto()


        class Request:
            def __init__(
                self, request_id: str, prompt_token_ids: list[int], eos_token_id: int | None = None
            ) -> None:
                self.request_id = request_id
                self.prompt_token_ids = prompt_token_ids
                self.eos_token_id = eos_token_id
        """,
    "prov/sched.py": """
        from dataclasses import dataclass

        from prov.config import SchedConfig
        from prov.request import Request


        @dataclass
        class SchedulerOutput:
            total_num_scheduled_tokens: int
            num_scheduled_tokens: dict[str, int]


        class Scheduler:
            def __init__(self, config: SchedConfig, kv_cache_config: int) -> None:
                self.config = config

            def add_request(self, request: Request) -> None: ...

            def schedule(self) -> SchedulerOutput:
                return SchedulerOutput(0, {})


        def get_kv_cache_config(
            config: SchedConfig, groups: list[int], available_memory: int
        ) -> int:
            return available_memory // config.block_size
        """,
    "prov/executor/__init__.py": "",
    "prov/executor/abstract.py": """
        import torch

        from prov.config import SchedConfig


        class Executor:
            def __init__(self, config: SchedConfig) -> None:
                self.config = config
                self.device = torch.device("cpu")

            def initialize_from_config(self, kv_cache_configs: list[int]) -> None: ...

            def collective_rpc(self, method: str, args: tuple[object, ...] = ()) -> list[object]:
                return []
        """,
    "prov/executor/multiproc.py": """
        from prov.executor.abstract import Executor


        class MultiprocExecutor(Executor):
            def collective_rpc(self, method: str, args: tuple[object, ...] = ()) -> list[object]:
                return [method]
        """,
    "prov/sequence.py": """
        class IntermediateTensors:
            def __init__(self, tensors: dict[str, object]) -> None:
                self.tensors = tensors
        """,
}

CONSUMER = {
    "pyproject.toml": """
        [project]
        name = "cons"
        version = "0.1"
        dependencies = ["prov==1.0", "torch"]
        """,
    "src/cons/__init__.py": "",
    "src/cons/generator.py": """
        import torch

        from prov.config import SchedConfig
        from prov.executor.multiproc import MultiprocExecutor
        from prov.request import Request, RequestStatus
        from prov.sched import Scheduler, get_kv_cache_config


        class Generator:
            def __init__(self) -> None:
                self.config = SchedConfig(max_seqs=4)
                self.executor = MultiprocExecutor(self.config)
                kv = get_kv_cache_config(self.config, [1], 1024)  # type: ignore[misc]
                self.scheduler = Scheduler(self.config, kv)
                self.executor.initialize_from_config([kv])

            def generate(self, ids: list[int]) -> int:
                request = Request(request_id="r", prompt_token_ids=ids, eos_token_id=2)
                self.scheduler.add_request(request)
                out = self.scheduler.schedule()
                self.executor.collective_rpc(method="reset")
                if torch.cuda.is_available() and out.num_scheduled_tokens:
                    return RequestStatus.FINISHED_ABORTED
                return out.total_num_scheduled_tokens
        """,
    "src/cons/worker.py": """
        from prov.sequence import IntermediateTensors


        def wrap(tensors):
            return IntermediateTensors(tensors)
        """,
}


def at(relative: str, snippet: str, files: dict[str, str] = PROVIDER) -> str:
    """``path:line`` of the only line of a provider file containing `snippet`."""
    lines = textwrap.dedent(files[relative]).lstrip("\n").splitlines()
    hits = [n for n, line in enumerate(lines, 1) if snippet in line]
    assert len(hits) == 1, f"{snippet!r} occurs {len(hits)} times in {relative}"
    return f"{relative}:{hits[0]}"
