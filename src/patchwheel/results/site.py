"""What the results pages and README's status lines hold, written or checked as a whole.

:func:`expected` gives every file's text from the committed JSON alone: one page per report
under docs/results/<kind>/, docs/results/index.md (current reports first, superseded runs in a
section of their own), and README's block between :data:`README_START` and :data:`README_END`
(one line per current report, linking its page). :func:`write` makes the tree so; :func:`check`
names every file that differs, including pages no report gives any more.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from patchwheel import atomic
from patchwheel.errors import ResultsError
from patchwheel.results import cpu, gpu, other
from patchwheel.results.catalog import KINDS, Report, find_reports

README_START = "<!-- results: written by python -m patchwheel.results -->"
README_END = "<!-- /results -->"
RESULTS = "docs/results"
GENERATOR = "`python -m patchwheel.results`"

SECTIONS = {
    "gpu": "GPU verification (`nox -s gpu`)",
    "cpu": "CPU verification (`nox -s verify`)",
    "bench": "Benchmarks (`benchmarks/`)",
    "bisect": "Bisects (`nox -s bisect`)",
    "roll": "Rolls (`nox -s roll`)",
}


def _title(report: Report) -> str:
    titles: dict[str, Callable[[Report], str]] = {
        "gpu": gpu.title,
        "cpu": cpu.title,
        "bench": other.bench_title,
        "bisect": other.bisect_title,
        "roll": other.roll_title,
    }
    return titles[report.kind](report)


def _status(report: Report) -> str:
    data = report.data
    if report.kind == "gpu":
        return gpu.status(report)
    if report.kind in ("cpu", "roll"):
        return str(data.get("status"))
    if report.kind == "bisect":
        flips = len(data.get("flips") or [])
        return f"{flips} change{'' if flips == 1 else 's'} of a finding located"
    records = len(data) if isinstance(data, list) else 1
    return f"{records} record{'' if records == 1 else 's'} of figures"


def _body(report: Report, root: Path) -> list[str]:
    if report.kind == "gpu":
        return gpu.body(report)
    if report.kind == "cpu":
        return cpu.body(cpu.checked(report, root), report.generation)
    if report.kind == "bisect":
        return other.bisect_body(report)
    if report.kind == "roll":
        return other.roll_body(report)
    return other.bench_body(report)


def _currency(report: Report) -> str:
    if not report.stages:
        return ""
    if report.superseded:
        return f"superseded: each stage it ran ({', '.join(report.stages)}) ran again later"
    return f"newest for {', '.join(report.current_for)}"


def page(report: Report, root: Path) -> str:
    currency = _currency(report)
    head = [
        f"# {_title(report)}",
        "",
        f"Written by {GENERATOR} from `{report.source}` (status **{_status(report)}**"
        + (f"; {currency}" if currency else "")
        + "). Edit nothing here: run the generator again.",
        "",
    ]
    return "\n".join([*head, *_body(report, root)]).rstrip("\n") + "\n"


def _line(report: Report, link: str) -> str:
    currency = _currency(report)
    return f"- [{_title(report)}]({link}): {_status(report)}" + (
        f"; {currency}" if currency else ""
    )


def index(reports: list[Report]) -> str:
    lines = [
        "# Results",
        "",
        f"Every page here is written by {GENERATOR} from a JSON report committed under "
        "`reports/`, and CI checks (`--check`) that each page is what its JSON gives. A GPU or "
        "CPU run is *superseded* when every stage it measured was measured again later by a run "
        "of the same kind (generation, vLLM version, tensor parallel size); its page stays.",
        "",
    ]
    for kind in KINDS:
        current = [r for r in reports if r.kind == kind and not r.superseded]
        if current:
            lines += [f"## {SECTIONS[kind]}", ""]
            lines += [_line(r, r.page) for r in current]
            lines.append("")
    superseded = [r for r in reports if r.superseded]
    if superseded:
        lines += ["## Superseded runs", ""]
        lines += [_line(r, r.page) for r in superseded]
        lines.append("")
    lines += ["```{toctree}", ":hidden:", ""]
    lines += [r.page.removesuffix(".md") for r in reports]
    lines += ["```"]
    return "\n".join(lines) + "\n"


def readme_block(reports: list[Report]) -> str:
    lines = [_line(r, f"{RESULTS}/{r.page}") for r in reports if not r.superseded]
    superseded = sum(r.superseded for r in reports)
    lines.append(
        f"- Superseded runs ({superseded}) and every figure: [{RESULTS}/]({RESULTS}/index.md)."
    )
    return "\n".join(lines)


def _readme(root: Path, block: str) -> str:
    path = root / "README.md"
    text = path.read_text(encoding="utf-8")
    head, start, rest = text.partition(README_START)
    _, end, tail = rest.partition(README_END)
    if not (start and end):
        raise ResultsError(f"README.md has no {README_START} … {README_END} block to write")
    return f"{head}{README_START}\n{block}\n{README_END}{tail}"


def expected(root: Path) -> dict[str, str]:
    """Every generated file's text, by its path relative to ``root`` (posix)."""
    reports = find_reports(root)
    files = {f"{RESULTS}/{r.page}": page(r, root) for r in reports}
    files[f"{RESULTS}/index.md"] = index(reports)
    files["README.md"] = _readme(root, readme_block(reports))
    return files


def _stale(root: Path, files: dict[str, str]) -> list[str]:
    base = root / RESULTS
    found = [p.relative_to(root).as_posix() for p in base.rglob("*.md")] if base.is_dir() else []
    return sorted(name for name in found if name not in files)


def check(root: Path) -> list[str]:
    """The generated files that differ from what the JSON gives (missing, changed, stale)."""
    files = expected(root)
    differ = [
        name
        for name, text in sorted(files.items())
        if not (root / name).is_file() or (root / name).read_text(encoding="utf-8") != text
    ]
    return differ + _stale(root, files)


def write(root: Path) -> list[str]:
    """Write every generated file that differs and remove stale pages; the paths touched."""
    files = expected(root)
    touched = []
    for name, text in sorted(files.items()):
        path = root / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_text(path, text)
            touched.append(name)
    for name in _stale(root, files):
        (root / name).unlink()
        touched.append(name)
    return touched
