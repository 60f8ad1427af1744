"""When an up-to-date build's manifest still says what the target asks of its GPUs."""

from __future__ import annotations

from pathlib import Path

from patchwheel.building.kernels import from_manifest, recorded
from patchwheel.config.targets import Target, read_target
from patchwheel.manifest import Manifest, WheelEntry

TOML = """\
description = "t"
{archs}
[projects.p]
build = "source"
pin = "p==1.0"
"""
SHA = "0" * 64
KERNELS = {
    "schema": 2,
    "filename": "p-1.0-py3-none-any.whl",
    "sha256": SHA,
    "scanner": "cuobjdump 13.5.37",
    "shared-objects": 1,
    "modules": {"p/_k.so": {"sass": ["sm_90a"], "ptx": []}},
}


def target(tmp_path: Path, archs: str = "") -> Target:
    (tmp_path / "target.toml").write_text(TOML.format(archs=archs))
    return read_target(tmp_path, "t")


def manifest(gpu: dict | None, kernels: dict | None = KERNELS) -> Manifest:
    wheel = WheelEntry("p", "p", "1.0", "p-1.0-py3-none-any.whl", SHA, kernels=kernels)
    sdist = WheelEntry("q", "q", "1.0", "q-1.0.tar.gz", SHA)  # an sdist has no kernels to read
    return Manifest(target="t", wheels=(wheel, sdist), gpu=gpu)


def test_a_manifest_is_current_only_with_the_same_gpu_demands(tmp_path: Path) -> None:
    default = target(tmp_path)
    gpu = {**default.gpu.to_json(), "modules": []}
    assert recorded(manifest(gpu), default)
    assert not recorded(manifest(None), default)  # written before kernels were read
    assert not recorded(manifest(gpu, kernels=None), default)  # a wheel not read
    assert not recorded(manifest(gpu, kernels={**KERNELS, "schema": 1}), default)  # read older
    narrower = target(tmp_path, 'gpu-archs = ["sm_90"]')
    assert not recorded(manifest(gpu), narrower)  # target.toml changed: check and write again


def test_the_recorded_kernels_are_read_back_per_wheel(tmp_path: Path) -> None:
    read = from_manifest(manifest({}).wheels)
    assert read[1] is None
    assert read[0] is not None and read[0].modules[0].sass == ("sm_90a",)
