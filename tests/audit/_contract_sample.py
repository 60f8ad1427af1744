"""A provider (`prov`) with plugin hooks at two versions, and a plugin (`plug`) written for 1.0.

Between 1.0 and 2.0 the provider changes its contract every way the audit judges:

- ``Connector.save`` gains a required parameter, ``load`` renames one, ``flush`` makes one
  required, ``close`` makes one keyword-only; ``prefer_blocks`` is removed and
  ``register_blocks`` renamed ``register_kv_blocks``; ``shutdown`` is a new abstract method;
  ``_cleanup`` (private) and ``describe`` are new methods whose names the plugin already uses
  (the plugin's ``describe`` accepts what the base's declares: no finding, an override now),
  as is ``reset`` (the plugin's does not accept the base's ``hard``);
- the connector registry drops ``FileConnector``;
- the worker's ``load_model`` gains a required parameter, ``sleep`` is removed, ``capture``
  is new (the plugin's worker extension has one).

What holds at both: ``start`` (already mismatched at 1.0: a blind spot), ``_write`` (a private
hook, overridden at both), the class named by module path, the registered ``Shared`` connector
and the plugin's own registered ``Mine``, ``get_spec`` and the extension's own ``dump``.
"""

from __future__ import annotations

from patchwheel.audit import NamingRules

RULES = NamingRules(
    registry_modules=("prov.factory",),
    worker_classes=("prov.worker.Worker",),
    rpc_wrappers=(),
)

HOOKS_V1 = """
from abc import ABC, abstractmethod


class Connector(ABC):
    def __init__(self, config: int, role: str) -> None:
        self.config = config

    @abstractmethod
    def start(self, context: object, **kwargs: object) -> None: ...

    def save(self, layer: str, tensor: object) -> None: ...

    def load(self, layer: str, old_name: int) -> None: ...

    def flush(self, force: bool = False) -> None: ...

    def close(self, timeout: float) -> None: ...

    def _write(self, data: bytes) -> None: ...

    def _state(self) -> int:
        return 0

    @property
    def prefer_blocks(self) -> bool:
        return False

    def register_blocks(self, kv: object) -> None: ...

    @classmethod
    def layout(cls, config: int) -> str:
        return "NHD"
"""

HOOKS_V2 = """
from abc import ABC, abstractmethod


class Connector(ABC):
    def __init__(self, config: int, role: str) -> None:
        self.config = config

    @abstractmethod
    def start(self, context: object, **kwargs: object) -> None: ...

    def save(self, layer: str, tensor: object, meta: dict[str, int]) -> None: ...

    def load(self, layer: str, new_name: int) -> None: ...

    def flush(self, force: bool) -> None: ...

    def close(self, *, timeout: float) -> None: ...

    def _write(self, data: bytes) -> None: ...

    def _state(self) -> int:
        return 0

    def register_kv_blocks(self, kv: object) -> None: ...

    @classmethod
    def layout(cls, config: int) -> str:
        return "NHD"

    @abstractmethod
    def shutdown(self) -> None: ...

    def _cleanup(self) -> None: ...

    def describe(self) -> str:
        return "connector"

    def reset(self, hard: bool) -> None: ...
"""

FACTORY = """
class Factory:
    registry: dict[str, tuple[str, str]] = {{}}

    @classmethod
    def register_connector(cls, name: str, module: str, class_name: str) -> None:
        cls.registry[name] = (module, class_name)

{file}
Factory.register_connector("Shared", "prov.shared", "SharedConnector")
"""

FILE = 'Factory.register_connector("FileConnector", "prov.shared", "FileConnector")'

SHARED = """
from prov.hooks import Connector


class FileConnector(Connector):
    def start(self, context: object, **kwargs: object) -> None: ...


class SharedConnector(Connector):
    def start(self, context: object, **kwargs: object) -> None: ...
"""

WORKER_V1 = """
class WorkerBase:
    def get_spec(self) -> dict[str, int]:
        return {}


class Worker(WorkerBase):
    def load_model(self, path: str, *, strict: bool = True) -> None: ...

    def sleep(self) -> None: ...
"""

WORKER_V2 = """
class WorkerBase:
    def get_spec(self) -> dict[str, int]:
        return {}


class Worker(WorkerBase):
    def load_model(self, path: str, revision: str, *, strict: bool = True) -> None: ...

    def capture(self) -> None: ...
"""


def provider(version: str) -> dict[str, str]:
    one = version == "1.0"
    return {
        "pyproject.toml": f'[project]\nname = "prov"\nversion = "{version}"\n',
        "prov/__init__.py": "",
        "prov/hooks.py": HOOKS_V1 if one else HOOKS_V2,
        "prov/factory.py": FACTORY.format(file=FILE if one else ""),
        "prov/shared.py": SHARED,
        "prov/worker.py": WORKER_V1 if one else WORKER_V2,
    }


PLUGIN = """
from typing import Any

from prov.factory import Factory
from prov.hooks import Connector


class MyConnector(Connector):
    def __init__(self, config: int, role: str) -> None:
        super().__init__(config, role)

    def start(self, ctx: object, **kwargs: object) -> None: ...

    def save(self, layer: str, tensor: object) -> None: ...

    def load(self, layer: str, old_name: int) -> None: ...

    def flush(self) -> None: ...

    def close(self, seconds: float) -> None: ...

    def _write(self, data: bytes) -> None:
        self.written = self._state()

    @property
    def prefer_blocks(self) -> bool:
        return True

    def register_blocks(self, kv: object) -> None: ...

    @classmethod
    def layout(cls, config: int) -> str:
        return "HND"

    def _cleanup(self) -> None: ...

    def describe(self) -> str:
        return "mine"

    def reset(self) -> None: ...


class Extension:
    def capture(self) -> None: ...

    def dump(self) -> list[int]:
        return []


Factory.register_connector("Mine", "plug.connector", "MyConnector")
CONFIG = {"kv_connector": "MyConnector", "kv_connector_module_path": "plug.connector"}
OWN = {"kv_connector": "Mine"}
BUILTIN = {"kv_connector": "FileConnector", "kv_role": "kv_producer"}
SHARED = \'{"kv_connector": "Shared", "kv_role": "kv_both"}\'


def run(llm: Any, name: str) -> dict[str, str]:
    llm.collective_rpc("get_spec")
    llm.collective_rpc("load_model", args=("/models/m",))
    llm.collective_rpc("sleep")
    llm.collective_rpc("dump")
    llm.collective_rpc(name)
    return dict(worker_extension_cls="plug.connector.Extension")
"""

CONSUMER = {
    "pyproject.toml": '[project]\nname = "plug"\nversion = "0.1"\ndependencies = ["prov==1.0"]\n',
    "src/plug/__init__.py": "",
    "src/plug/connector.py": PLUGIN,
}
