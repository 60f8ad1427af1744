"""`patchwheel verify` refuses options that do not apply to the target's generation, before
anything runs, naming them (no silently ignored option)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import support


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target", "spec-0.9", "--families", "llama"], "--families and --no-user-path"),
        (["--target", "spec-0.9", "--no-user-path"], "--families and --no-user-path"),
        (["--target", "vllm-0.32", "--against", "spec-0.9"], "vllm-0.32 is generator"),
        (["--target", "spec-0.9", "--against", "spec-0.9-vllm-0.26"], "is served"),
        (["--target", "spec-0.9", "--against", "nosuch"], "no target 'nosuch'"),
    ],
)
def test_options_of_the_other_generation_are_refused(
    tmp_path: Path, args: list[str], says: str
) -> None:
    result = support.patchwheel(support.REPO_ROOT, "verify", *args, cache=tmp_path)
    assert result.returncode == 1
    assert says in result.stderr and "Traceback" not in result.stderr
