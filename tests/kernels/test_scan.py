"""Reading CUDA kernels out of real wheels with the real cuobjdump, and checking them.

Two small NVIDIA wheels from the index: nvjpeg (3.8 MB; one library with SASS for sm_75 to
sm_121 and PTX for sm_121) and the CUDA runtime (2.5 MB; its library has no device code).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchwheel.config.gpu import GpuSpec, Specific
from patchwheel.errors import BuildError
from patchwheel.kernels import (
    KernelArchError,
    check,
    cuobjdump,
    rows,
    scan_wheel,
    unused_specific,
)
from patchwheel.upstream.cache import Cache, sha256_file

pytestmark = pytest.mark.network

NVJPEG = "nvidia-nvjpeg==13.3.2.43"
RUNTIME = "nvidia-cuda-runtime==13.5.37"
LIB = "nvidia/cu13/lib/libnvjpeg.so.13"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("nvidia")
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    subprocess.run([*pip, "-d", str(out), NVJPEG, RUNTIME], check=True)
    found = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    return {"nvjpeg": found["nvidia_nvjpeg"], "runtime": found["nvidia_cuda_runtime"]}


@pytest.fixture
def fresh_locate() -> object:
    cuobjdump.locate.cache_clear()
    yield
    cuobjdump.locate.cache_clear()


def scan(path: Path, cache: Cache):  # type: ignore[no-untyped-def]
    return scan_wheel(path, sha256_file(path), cache)


def test_the_tool_is_the_declared_wheels_own_binary(fresh_locate: object) -> None:
    path = cuobjdump.locate()
    assert path.parts[-2:] == ("bin", "cuobjdump")
    assert cuobjdump.version().startswith("cuobjdump 13.")


def test_a_library_with_kernels_lists_its_sass_and_ptx(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    found = scan(wheels["nvjpeg"], Cache(tmp_path))
    assert found.shared_objects == 1
    (module,) = found.modules
    assert module.path == LIB
    assert module.sass == (
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_103",
        "sm_107",
        "sm_120",
        "sm_121",
    )
    assert module.ptx == ("sm_121",)


def test_a_library_without_device_code_is_counted_not_listed(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    found = scan(wheels["runtime"], Cache(tmp_path))
    assert found.shared_objects >= 1 and found.modules == ()


def test_a_scan_is_cached_by_sha256_and_a_new_wheel_needs_the_tool(
    wheels: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_locate: object
) -> None:
    cache = Cache(tmp_path / "cache")
    first = scan(wheels["nvjpeg"], cache)
    assert (cache.root / "kernels" / f"{first.sha256}.json").is_file()
    monkeypatch.setenv(cuobjdump.ENV, str(tmp_path / "no-such-cuobjdump"))
    cuobjdump.locate.cache_clear()
    assert scan(wheels["nvjpeg"], cache).modules == first.modules  # read from the cache
    other = tmp_path / "other-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheels["nvjpeg"]) as src, zipfile.ZipFile(other, "w") as dst:
        dst.writestr("other/libx.so", src.read(LIB))
    with pytest.raises(cuobjdump.ToolMissingError, match=r"PATCHWHEEL_CUOBJDUMP=.*not an exec"):
        scan(other, cache)


def test_kernels_kept_outside_the_registered_section_are_read_too(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    """As cuFFT keeps its kernels: fat binaries in the library's data, not in the .nv_fatbin
    section the runtime registers. Here: the CUDA runtime's library (no device code of its own)
    with nvjpeg's library appended; cuobjdump alone sees nothing in it."""
    with zipfile.ZipFile(wheels["runtime"]) as runtime, zipfile.ZipFile(wheels["nvjpeg"]) as jpeg:
        (cudart,) = [n for n in runtime.namelist() if "libcudart.so" in n]
        plain_bytes = runtime.read(cudart)
        jpeg_bytes = jpeg.read(LIB)
    plain = tmp_path / "libcudart.so"
    plain.write_bytes(plain_bytes)
    assert cuobjdump._list(plain, "cudart", "--list-elf") is None  # no device code, it says
    hidden = tmp_path / "libhidden.so"
    hidden.write_bytes(plain_bytes + jpeg_bytes)
    assert cuobjdump._list(hidden, "hidden", "--list-elf") is None  # nor here, it says

    listing = cuobjdump.list_code(hidden, "pkg/libhidden.so")

    assert listing is not None
    assert [a.name for a in listing.sass][-3:] == ["sm_107", "sm_120", "sm_121"]
    assert [a.name for a in listing.ptx] == ["sm_121"]
    assert cuobjdump.list_code(plain, "pkg/libcudart.so") is None
    assert not list(tmp_path.glob("*.fatbins.elf"))  # the gathered file is removed


def test_a_damaged_cache_entry_is_read_again(wheels: dict[str, Path], tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    sha = sha256_file(wheels["nvjpeg"])
    record = cache.root / "kernels" / f"{sha}.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"schema": 2, "modules": {"x.so": {"sass": ["sm_9"], "ptx": []}}}')
    assert scan(wheels["nvjpeg"], cache).modules[0].path == LIB


def test_a_file_that_is_not_a_wheel_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(BuildError, match="cannot read it as a wheel"):
        scan(bad, Cache(tmp_path / "c"))


def test_the_check_names_the_module_the_gpu_and_the_fix(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    found = [scan(wheels["nvjpeg"], Cache(tmp_path))]
    table = rows(found, ["sm_90", "sm_100", "sm_120", "sm_130"], GpuSpec())
    assert table[0].cells == {"sm_90": "sass", "sm_100": "sass", "sm_120": "sass", "sm_130": "ptx"}
    check(table, "t", "gpu-archs", "target.toml")  # nothing missing: no error

    old = rows(found, ["sm_70", "sm_90"], GpuSpec())
    assert old[0].missing == ["sm_70"]
    with pytest.raises(KernelArchError) as info:
        check(old, "target t", "gpu-archs in patches/t/target.toml", "patches/t/target.toml")
    text = str(info.value)
    assert f"{LIB} (nvidia_nvjpeg" in text and "cannot run on sm_70" in text
    assert "gpu-archs in patches/t/target.toml" in text and f'[gpu-specific."{LIB}"]' in text

    excused = GpuSpec(specific=(Specific(LIB, ("sm_90",), "built for Hopper and newer"),))
    table = rows(found, ["sm_70", "sm_90"], excused)
    assert table[0].cells == {"sm_70": "not for it", "sm_90": "sass"}
    check(table, "t", "gpu-archs", "target.toml")


def test_a_shared_object_that_is_no_elf_file_holds_no_code(tmp_path: Path) -> None:
    script = tmp_path / "libc.so"  # as glibc's libc.so: a linker script
    script.write_text("GROUP ( /lib/libc.so.6 )\n")
    assert cuobjdump.list_code(script, "pkg/libc.so") is None


def test_cuobjdump_failing_on_a_module_is_an_error_naming_it(tmp_path: Path) -> None:
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"\x7fELF")
    with pytest.raises(BuildError, match=r"cuobjdump --list-elf on pkg/lib\.so failed.*fatbin"):
        cuobjdump.list_code(lib, "pkg/lib.so")


def test_a_stale_exception_is_one_naming_a_package_these_wheels_have(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    found = [scan(wheels["nvjpeg"], Cache(tmp_path))]
    gone = Specific("nvidia/cu13/lib/libgone.so.1", ("sm_90",), "r")
    other = Specific("torch/lib/libtorch_cuda.so", ("sm_90",), "only a wheelhouse carries it")
    used = Specific(LIB, ("sm_90",), "r")
    spec = GpuSpec(specific=(gone, other, used))
    assert unused_specific(found, spec) == [gone]
