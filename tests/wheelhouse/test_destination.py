"""The destination: the GPU machine's real package list, every pip list format, tags, markers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchwheel.errors import ConfigError
from patchwheel.wheelhouse.destination import Destination, read_installed
from tests import support

H200_FREEZE = support.H200_FREEZE


def test_the_gpu_image_freeze_reads() -> None:
    installed = read_installed(H200_FREEZE)
    assert len(installed.packages) == 197
    assert str(installed.version("torch")) == "2.11.0"
    assert str(installed.version("Transformers")) == "5.17.0"
    assert str(installed.version("typing_extensions")) == "4.16.0"
    assert "huggingface-hub" in installed
    assert installed.version("vllm") is None


def test_installed_lists_in_every_pip_format(tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text(
        "# pip freeze\n--index-url https://example.invalid/simple\n"
        "torch @ file:///wheels/torch-2.11.0%2Bcu130-cp312-cp312-linux_x86_64.whl\n"
        "numpy==2.5.2\nsome-private-tool\nfoo @ git+https://example.invalid/foo.git\n"
    )
    installed = read_installed(freeze)
    assert str(installed.version("torch")) == "2.11.0+cu130"
    assert str(installed.version("numpy")) == "2.5.2"
    assert "some-private-tool" in installed and installed.version("some-private-tool") is None
    assert "foo" in installed and installed.version("foo") is None

    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([{"name": "Torch", "version": "2.11.0a0+git1234"}]))
    assert str(read_installed(listed).version("torch")) == "2.11.0a0+git1234"

    editable = tmp_path / "editable.txt"
    editable.write_text("numpy==2.5.2\n-e git+https://example.invalid/x.git#egg=x\n")
    with pytest.raises(ConfigError, match=r"line 2.*pip list --format=freeze"):
        read_installed(editable)
    broken = tmp_path / "broken.txt"
    broken.write_text("numpy==2.5.2\nthis is not a package line\n")
    with pytest.raises(ConfigError, match=r"broken\.txt: line 2"):
        read_installed(broken)
    with pytest.raises(ConfigError, match="pip list --format=freeze"):
        read_installed(tmp_path / "absent.txt")


def test_destination_tags_markers_and_uv_platform() -> None:
    dest = Destination("3.12", "manylinux_2_28_x86_64")
    tags = {str(t) for t in dest.supported_tags()}
    assert "cp312-cp312-manylinux_2_28_x86_64" in tags
    assert "cp312-abi3-manylinux2014_x86_64" in tags
    assert "cp38-abi3-manylinux_2_28_x86_64" in tags
    assert "py3-none-any" in tags
    assert "cp312-cp312-manylinux_2_31_x86_64" not in tags
    assert "cp311-cp311-manylinux_2_28_x86_64" not in tags
    assert "cp312-cp312-manylinux_2_28_aarch64" not in tags
    assert dest.uv_platform() == "x86_64-manylinux_2_28"
    env = dest.marker_environment()
    assert env["python_version"] == "3.12" and env["platform_machine"] == "x86_64"
    assert Destination("3.12", "manylinux2014_aarch64").uv_platform() == "aarch64-manylinux_2_17"
    with pytest.raises(ConfigError, match="--platform"):
        Destination("3.12", "win_amd64")
    with pytest.raises(ConfigError, match="--python-version"):
        Destination("three", "manylinux_2_28_x86_64")
