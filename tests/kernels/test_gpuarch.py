"""The compatibility rule: which SASS and PTX run on which GPU (patchwheel.gpuarch)."""

from __future__ import annotations

import pytest

from patchwheel.gpuarch import (
    ArchError,
    coverage,
    device,
    parse,
    ptx_compiles_for,
    sass_runs_on,
    sort_key,
)


def archs(*names: str) -> list:
    return [parse(n) for n in names]


@pytest.mark.parametrize(
    ("text", "major", "minor", "suffix"),
    [
        ("sm_75", 7, 5, ""),
        ("sm_90a", 9, 0, "a"),
        ("sm_100", 10, 0, ""),
        ("sm_100f", 10, 0, "f"),
        ("sm_121", 12, 1, ""),
        ("compute_90a", 9, 0, "a"),
    ],
)
def test_names_parse_to_compute_capabilities(
    text: str, major: int, minor: int, suffix: str
) -> None:
    arch = parse(text)
    assert (arch.major, arch.minor, arch.suffix) == (major, minor, suffix)
    assert arch.name == text.replace("compute_", "sm_")


@pytest.mark.parametrize("text", ["sm90", "sm_9", "sm_90b", "SM_90", "sm_1000", "", "sm_90 a"])
def test_anything_else_is_refused_with_the_way_to_write_it(text: str) -> None:
    with pytest.raises(ArchError, match="sm_90"):
        parse(text)


def test_a_gpu_is_a_plain_name_and_a_suffix_names_code() -> None:
    assert device("sm_120").name == "sm_120"
    with pytest.raises(ArchError, match=r"names code, not a GPU.*sm_90 \(compute capability 9.0\)"):
        device("sm_90a")


@pytest.mark.parametrize(
    ("sass", "gpu", "runs"),
    [
        ("sm_80", "sm_80", True),
        ("sm_80", "sm_86", True),  # same major, higher minor
        ("sm_86", "sm_80", False),  # never downwards
        ("sm_90", "sm_100", False),  # never across majors
        ("sm_100", "sm_103", True),
        ("sm_120", "sm_121", True),
        ("sm_90a", "sm_90", True),
        ("sm_100a", "sm_103", False),  # arch-specific: exactly 10.0
        ("sm_100f", "sm_103", True),  # family-specific: the 10.x family
        ("sm_100f", "sm_120", False),
    ],
)
def test_sass_runs_within_its_major_and_a_variants_only_on_their_own_gpu(
    sass: str, gpu: str, runs: bool
) -> None:
    assert sass_runs_on(parse(sass), device(gpu)) is runs


@pytest.mark.parametrize(
    ("ptx", "gpu", "compiles"),
    [
        ("sm_80", "sm_90", True),  # PTX compiles forward, across majors
        ("sm_80", "sm_120", True),
        ("sm_90", "sm_89", False),  # never backwards
        ("sm_90a", "sm_90", True),
        ("sm_90a", "sm_100", False),  # arch-specific PTX is not forward compatible
        ("sm_100f", "sm_103", True),
        ("sm_100f", "sm_120", False),  # family-specific PTX stays in its family
    ],
)
def test_ptx_compiles_forward_except_a_and_f_variants(ptx: str, gpu: str, compiles: bool) -> None:
    assert ptx_compiles_for(parse(ptx), device(gpu)) is compiles


def test_coverage_prefers_native_code_then_ptx_then_none() -> None:
    # vLLM 0.26.0's _C_stable_libtorch.abi3.so (read with cuobjdump, findings.md)
    sass = archs("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120")
    ptx = archs("sm_80", "sm_89", "sm_90")
    assert coverage(sass, ptx, device("sm_90")) == "sass"
    assert coverage(sass, ptx, device("sm_103")) == "sass"
    assert coverage(sass, ptx, device("sm_110")) == "ptx"  # Thor: only through PTX
    assert coverage(sass, ptx, device("sm_70")) is None
    # FlashAttention 3: sm_90a SASS only
    fa3 = archs("sm_90a")
    assert coverage(fa3, [], device("sm_90")) == "sass"
    assert coverage(fa3, [], device("sm_100")) is None
    assert coverage(fa3, [], device("sm_120")) is None


def test_sort_key_orders_by_capability_then_suffix() -> None:
    names = ["sm_120", "sm_90a", "sm_100", "sm_90", "sm_75"]
    assert [a.name for a in sorted(archs(*names), key=sort_key)] == [
        "sm_75",
        "sm_90",
        "sm_90a",
        "sm_100",
        "sm_120",
    ]
