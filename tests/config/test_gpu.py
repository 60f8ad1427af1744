"""target.toml's gpu-archs and [gpu-specific] (config/gpu.py), read through read_target."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.config.gpu import DEFAULT_ARCHS
from patchwheel.config.targets import Target, read_target
from patchwheel.errors import ConfigError

BASE = """\
description = "t"
{extra}
[projects.p]
build = "source"
pin = "p==1.0"
"""

FA3 = "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"


def target(tmp_path: Path, extra: str) -> Target:
    (tmp_path / "target.toml").write_text(BASE.format(extra=extra))
    return read_target(tmp_path, "t")


def test_left_out_the_gpus_are_hopper_and_blackwell(tmp_path: Path) -> None:
    gpu = target(tmp_path, "").gpu
    assert gpu.archs == DEFAULT_ARCHS == ("sm_90", "sm_100", "sm_120")
    assert gpu.declared is False and gpu.specific == ()


def test_declared_gpus_and_a_module_built_for_fewer(tmp_path: Path) -> None:
    gpu = target(
        tmp_path,
        f'gpu-archs = ["sm_90", "sm_100"]\n[gpu-specific."{FA3}"]\n'
        'archs = ["sm_90"]\nreason = "FlashAttention 3 is Hopper-only"\n',
    ).gpu
    assert gpu.archs == ("sm_90", "sm_100") and gpu.declared
    specific = gpu.specific_to(FA3)
    assert specific is not None and specific.archs == ("sm_90",)
    assert gpu.to_json()["specific"][FA3]["reason"] == "FlashAttention 3 is Hopper-only"
    assert gpu.specific_to("vllm/_C.abi3.so") is None


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ('gpu-archs = ["sm_90a"]', "names code, not a GPU"),
        ('gpu-archs = ["hopper"]', "is not a CUDA architecture"),
        ("gpu-archs = []", "non-empty list"),
        ('gpu-archs = "sm_90"', "non-empty list"),
        ('gpu-archs = ["sm_90", "sm_90"]', "listed twice"),
        ("gpu-archs = [90]", "is not a string"),
        ('[gpu-specific."x.so"]\narchs = ["sm_90"]\n', "exactly archs"),
        ('[gpu-specific."x.so"]\narchs = ["sm_90"]\nreason = " "\n', "reason must say why"),
        ('[gpu-specific."../x.so"]\narchs = ["sm_90"]\nreason = "r"\n', "path inside the wheel"),
        ('[gpu-specific."/x.so"]\narchs = ["sm_90"]\nreason = "r"\n', "path inside the wheel"),
        ('[gpu-specific."x.so"]\narchs = ["sm_100a"]\nreason = "r"\n', "names code"),
        ('gpu-specific = ["x.so"]', "must be a table"),
    ],
)
def test_bad_gpu_settings_are_refused_naming_the_file_and_the_fix(
    tmp_path: Path, extra: str, needle: str
) -> None:
    with pytest.raises(ConfigError, match=r"target\.toml") as info:
        target(tmp_path, extra)
    assert needle in str(info.value)
