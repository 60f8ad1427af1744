"""Fixtures for the audit tests: real source trees written to disk, a real mypy engine."""

from __future__ import annotations

import pytest

from patchwheel.audit import MypyEngine


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> MypyEngine:
    """One engine (and cache) for the session, as a real audit run would have."""
    return MypyEngine(cache_dir=tmp_path_factory.mktemp("audit-cache"))
