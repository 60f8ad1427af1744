"""Explain a crashed extraction: which speculators line called which vLLM function, and what broke.

Two sources: ``failure.json``, written by the extraction script from the live exception in the
driver process (it resolves the called function in-process), and the run's log, where each vLLM
worker process prints the traceback of an RPC that failed on its side (the driver only sees
"Worker failed with error '...'"). Worker tracebacks are parsed from text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# vLLM prefixes worker log lines: "(Worker pid=123) ERROR 11-30 03:02:30 [file.py:1063] ".
_LOG_PREFIX = re.compile(r"^\([\w.-]+ pid=\d+\) (?:[A-Z]+ [\d-]+ [\d:.]+ \[[^\]]*\] ?)?")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|\w+))(?::|$)")
_MISSING_ATTR = re.compile(r"'(?P<cls>\w+)' object has no attribute '(?P<attr>\w+)'")
_CALLED_NAME = re.compile(r"^(?:\w+Error: )?(?P<name>[A-Za-z_][\w.]*)\(\)")


@dataclass(frozen=True)
class Frame:
    """One traceback entry."""

    file: str
    line: int
    function: str

    @property
    def package(self) -> str:
        """Top-level package the file belongs to (by its site-packages path), or ''."""
        module = self.module
        return module.split(".")[0] if module else ""

    @property
    def module(self) -> str:
        """Dotted module name for files under site-packages, else ''."""
        _, sep, rest = self.file.rpartition("site-packages/")
        if not sep or not rest.endswith(".py"):
            return ""
        module = rest[: -len(".py")].replace("/", ".")
        return module.removesuffix(".__init__")

    @property
    def where(self) -> str:
        """`path/inside/package.py:LINE (function)` for messages."""
        _, sep, rest = self.file.rpartition("site-packages/")
        return f"{rest if sep else self.file}:{self.line} ({self.function})"


@dataclass(frozen=True)
class ParsedTraceback:
    """A traceback read back from text: its frames and its final exception line."""

    frames: tuple[Frame, ...]
    exception: str


@dataclass(frozen=True)
class CrashDiagnosis:
    """Where an extraction crash happened, in terms a patch author can act on."""

    phase: str
    exception: str
    site: str | None  # the last speculators frame, `file:line (function)`
    vllm_call: str | None  # the vLLM function that speculators frame called
    raised_at: str | None  # the innermost frame, when it differs from the site
    in_worker: bool

    def message(self, log_path: Path) -> str:
        """The user-facing explanation, naming the failing vLLM call when there is one."""
        where = "in a vLLM worker process" if self.in_worker else "in the driver process"
        parts = [f"hidden-state extraction crashed {where} during {self.phase}"]
        if self.site is not None and self.vllm_call is not None:
            parts.append(f"{self.site} called {self.vllm_call}")
        elif self.site is not None:
            parts.append(f"last speculators frame: {self.site}")
        if self.raised_at is not None:
            parts.append(f"raised at {self.raised_at}")
        parts.append(self.exception)
        return (
            "; ".join(parts)
            + f". Full log: {log_path}. Fix the speculators series for this vLLM pin "
            "(or the vLLM series if vLLM itself is wrong) and run verify again."
        )


def strip_log_prefix(line: str) -> str:
    """A log line without vLLM's `(Worker pid=N) LEVEL date [file:line]` prefix."""
    return _LOG_PREFIX.sub("", line, count=1)


def parse_tracebacks(text: str) -> list[ParsedTraceback]:
    """Every `Traceback (most recent call last):` block in text, in order of appearance."""
    lines = [strip_log_prefix(line) for line in text.splitlines()]
    found: list[ParsedTraceback] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last):"):
            i += 1
            continue
        frames: list[Frame] = []
        i += 1
        while i < len(lines):
            match = _FRAME.match(lines[i])
            if match is not None:
                frames.append(Frame(match["file"], int(match["line"]), match["func"]))
            elif lines[i] and not lines[i].startswith(" "):
                break
            i += 1
        exception = lines[i].strip() if i < len(lines) else ""
        found.append(ParsedTraceback(tuple(frames), exception))
        i += 1
    return found


def _callee_from_text(frames: tuple[Frame, ...], index: int, exception: str) -> str | None:
    """The function the frame at index called: the next frame if it is vLLM's, else the message."""
    if index + 1 < len(frames) and frames[index + 1].package == "vllm":
        nxt = frames[index + 1]
        return f"{nxt.module}.{nxt.function}"
    if (missing := _MISSING_ATTR.search(exception)) is not None:
        return f"{missing['cls']}.{missing['attr']} (no such attribute in this vLLM)"
    message = exception.partition(": ")[2]
    if (named := _CALLED_NAME.match(message)) is not None:
        return named["name"]
    return None


def _innermost(frames: tuple[Frame, ...]) -> str | None:
    """The innermost frame that is a real file (not `<string>` code from eval)."""
    real = [f for f in frames if not f.file.startswith("<")]
    return real[-1].where if real else None


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n")[0]


def diagnose_worker(tb: ParsedTraceback) -> tuple[str | None, str | None, str | None]:
    """(speculators site, vLLM call, innermost frame) of one worker traceback."""
    frames = tb.frames
    innermost = _innermost(frames)
    for i in range(len(frames) - 1, -1, -1):
        if frames[i].package == "speculators":
            raised = innermost if innermost != frames[i].where else None
            return frames[i].where, _callee_from_text(frames, i, tb.exception), raised
    return None, None, innermost


def _driver_innermost(traceback_text: str) -> str | None:
    tracebacks = parse_tracebacks(traceback_text)
    if not tracebacks:
        return None
    # Python prints the chain cause-first; the first block holds the innermost cause.
    return _innermost(tracebacks[0].frames)


def diagnose(failure: dict[str, Any], log_text: str) -> CrashDiagnosis:
    """Combine the driver's failure record with any worker traceback in the log."""
    site_info = failure.get("site")
    site = (
        Frame(site_info["file"], int(site_info["line"]), site_info["function"]).where
        if site_info
        else None
    )
    call: str | None = failure.get("callee")
    message = _first_paragraph(str(failure.get("message", "")))
    exception = f"{failure.get('type', 'Exception')}: {message}"
    raised_at = _driver_innermost(str(failure.get("traceback", "")))
    if raised_at == site:
        raised_at = None
    worker_tbs = [
        tb
        for tb in parse_tracebacks(log_text)
        if any(f.function == "_execute_worker_rpc" for f in tb.frames)
    ]
    if not worker_tbs or "Worker failed" not in str(failure.get("message", "")):
        return CrashDiagnosis(str(failure.get("phase")), exception, site, call, raised_at, False)
    worker = worker_tbs[-1]
    w_site, w_call, w_raised = diagnose_worker(worker)
    if w_site is not None:
        # The failing speculators code ran in the worker (the capture hook, the extension).
        site, call, raised_at = w_site, w_call or call, w_raised
    else:
        # speculators' driver called an executor method; it failed inside vLLM's worker.
        raised_at = w_raised
    return CrashDiagnosis(
        str(failure.get("phase")), worker.exception or exception, site, call, raised_at, True
    )


def read_failure(out_dir: Path) -> dict[str, Any] | None:
    """The extraction script's failure record, if it wrote one."""
    path = out_dir / "failure.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
