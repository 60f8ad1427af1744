"""Nothing published holds an absolute path of the machine that ran: README, docs/ and reports/
name paths relative to the checkout or the wheelhouse ($WHEELHOUSE, $WORK_DIR, …)."""

from __future__ import annotations

from pathlib import Path

from patchwheel.results.paths import machine_paths, text_files
from tests import support

ROOT = support.REPO_ROOT


def _own_paths() -> list[str]:
    return [str(ROOT), str(Path.home())]


def test_no_machine_path_in_readme_docs_or_reports() -> None:
    files = text_files(ROOT, ["docs", "reports"], ["README.md"])
    assert any(p.suffix == ".json" for p in files) and (ROOT / "README.md") in files
    found = {}
    for path in files:
        name = path.relative_to(ROOT).as_posix()
        if "/_build/" in f"/{name}":
            continue
        hits = machine_paths(path.read_text("utf-8"), _own_paths())
        if hits:
            found[name] = hits[:3]
    assert found == {}, "absolute machine paths (fix the writer: patchwheel.portable)"


def test_what_counts_as_a_machine_path() -> None:
    text = (
        "log: /tmp/pw-served/x.log; scripts /work/main/build/s; /root/.cache/p; /home/u/x; "
        f"{ROOT}/build/x; relative build/tmp/x and $WORK_DIR/x; https://host/work/x; "
        "file:///tmp/wh/simple"
    )
    found = machine_paths(text, _own_paths())
    assert "/tmp/pw-served/x.log" in found and "/work/main/build/s" in found
    assert "/root/.cache/p" in found and "/home/u/x" in found
    assert any(f.startswith(str(ROOT)) for f in found)
    assert not any("build/tmp" in f or "host/work" in f or "$WORK_DIR" in f for f in found)
