"""patchwheel's import trace: which top-level modules a process imported, and which it looked
for in vain. Standard library only; it records and changes nothing else.

The GPU session puts this folder (which holds nothing but this file) on a child's PYTHONPATH
and names a folder in ``PATCHWHEEL_IMPORT_TRACE``; Python then imports this module at start-up
in that process and in every process it starts (spawned or forked: vLLM's workers too). Each
process writes ``<pid>-<random>.json`` there (rewritten once a second while something new was
imported, and at exit; a forked child starts its own file):

- ``imported``: top-level names in ``sys.modules`` (every module that was imported, whatever
  imported it and however);
- ``missing``: top-level names some import looked for and no finder found, each with the first
  module that asked (the first frame outside importlib) and ``how``: ``import`` (an import
  statement, ``__import__`` or ``importlib.import_module``: the import raised
  ModuleNotFoundError) or ``probe`` (``importlib.util.find_spec``, which asks without importing);
- ``libraries``: the shared objects of installed packages mapped into the process (read from
  ``/proc/self/maps``, as paths below their ``sys.path`` folder: ``vllm/_C.abi3.so``), however
  they were loaded (an import, ``torch.ops.load_library``, ctypes): the GPU session matches
  them against the build's CUDA modules.

An earlier ``sitecustomize`` on the path (the interpreter's own) is run after this one, so
nothing it does is lost.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import secrets
import sys
import threading
import time
from types import FrameType, ModuleType
from typing import Any

VARIABLE = "PATCHWHEEL_IMPORT_TRACE"
HERE = os.path.dirname(os.path.abspath(__file__))
IMPORTLIB = os.path.dirname(os.path.abspath(importlib.util.__file__))
INTERVAL_S = 1.0


class _Trace:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.missing: dict[str, dict[str, str]] = {}
        self.lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        self.pid = os.getpid()
        self.ppid = os.getppid()  # at start: a child outliving its parent is re-parented
        self.path = os.path.join(self.folder, f"{self.pid}-{secrets.token_hex(3)}.json")
        self.written: tuple[int, int, int] = (-1, -1, -1)
        self.started = time.time()
        thread = threading.Thread(target=self._loop, name="patchwheel-import-trace", daemon=True)
        thread.start()

    def after_fork(self) -> None:
        self.lock = threading.Lock()
        self.missing = dict(self.missing)
        self._start()

    def note_missing(self, name: str, how: str, importer: str) -> None:
        with self.lock:
            self.missing.setdefault(name, {"how": how, "importer": importer})

    def _loop(self) -> None:
        while True:
            time.sleep(INTERVAL_S)
            self.write()

    def write(self) -> None:
        try:
            modules = {name.partition(".")[0] for name in list(sys.modules)}
            with self.lock:
                missing = {k: v for k, v in self.missing.items() if k not in modules}
            libraries = _libraries()
            state = (len(modules), len(missing), len(libraries))
            if state == self.written:
                return
            record = {
                "pid": self.pid,
                "ppid": self.ppid,
                "argv": list(sys.argv),
                "started": self.started,
                "imported": sorted(modules - set(sys.stdlib_module_names)),
                "missing": missing,
                "libraries": libraries,
            }
            temp = f"{self.path}.tmp"
            with open(temp, "w", encoding="utf-8") as handle:
                json.dump(record, handle)
            os.replace(temp, self.path)
            self.written = state
        except Exception:  # a trace never breaks the process it watches
            return


def _libraries() -> list[str]:
    """Shared objects of installed packages mapped into this process, as paths below the
    ``sys.path`` folder holding them (a ``pip install --target`` site too); Linux, else none."""
    roots = sorted(
        {os.path.join(os.path.abspath(p), "") for p in sys.path if p and os.path.isdir(p)},
        key=len,
        reverse=True,
    )
    found = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                _, slash, rest = line.rstrip("\n").partition("/")
                path = slash + rest
                name = os.path.basename(path)
                if not (name.endswith(".so") or ".so." in name):
                    continue
                root = next((r for r in roots if path.startswith(r)), None)
                if root is not None:
                    found.add(path[len(root) :])
    except OSError:
        return []
    return sorted(found)


class _LastFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: sees every top-level name no other finder found."""

    def __init__(self, trace: _Trace) -> None:
        self.trace = trace

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None and "." not in fullname:
            how, importer = _caller()
            self.trace.note_missing(fullname, how, importer)
        return None


def _caller() -> tuple[str, str]:
    """How the name was asked for, and the first module outside importlib that asked."""
    frame: FrameType | None = sys._getframe(2)
    how = "import"
    while frame is not None:
        filename = frame.f_code.co_filename
        inside = filename.startswith("<frozen importlib") or (
            os.path.dirname(filename) == IMPORTLIB
        )
        if not inside:
            return how, str(frame.f_globals.get("__name__", "?"))
        if frame.f_code.co_name == "find_spec" and filename.rstrip(">").endswith(
            ("importlib.util", os.sep + "util.py")
        ):
            how = "probe"
        frame = frame.f_back
    return how, "?"


def _writing_first(trace: _Trace, exit_now: Any) -> Any:
    """``os._exit`` (a forked multiprocessing child leaves through it, skipping atexit),
    writing the trace first."""

    def _exit(status: int) -> None:
        trace.write()
        exit_now(status)

    return _exit


def _chain_next_sitecustomize() -> None:
    """Run the sitecustomize this one shadows (the next one on sys.path), if any."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _install() -> None:
    folder = os.environ.get(VARIABLE)
    if folder:
        os.makedirs(folder, exist_ok=True)
        trace = _Trace(folder)
        sys.meta_path.append(_LastFinder(trace))
        atexit.register(trace.write)
        os.register_at_fork(after_in_child=trace.after_fork)
        os._exit = _writing_first(trace, os._exit)
    _chain_next_sitecustomize()


_install()
