"""No module of the library over 500 lines (the project's standard: one concept per module)."""

from __future__ import annotations

from pathlib import Path

LIMIT = 500
SRC = Path(__file__).resolve().parents[1] / "src"


def test_no_module_over_500_lines() -> None:
    sizes = {p: len(p.read_text("utf-8").splitlines()) for p in SRC.rglob("*.py")}
    assert len(sizes) > 100, sorted(sizes)  # the library is there
    over = {str(p.relative_to(SRC)): n for p, n in sizes.items() if n > LIMIT}
    assert not over, f"split these modules (more than {LIMIT} lines): {over}"
