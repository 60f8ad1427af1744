"""The build-time consistency check on real wheel files: requirements on the target's own
projects must admit the built versions; declared consumer installs must fit their variant."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.building.consistency import Built, check_built_set
from patchwheel.config.targets import Target, load_target
from patchwheel.errors import BuildError
from tests import support
from tests.config.test_consumer import write

CONSUMER = """\
[consumer.cpu]
install = ["spec[run-cpu]"]

[consumer.cuda]
install = ["spec[run]"]
"""


def target(tmp_path: Path, consumer: str = CONSUMER) -> Target:
    return load_target(write(tmp_path / "t", consumer), "t")


def built(tmp_path: Path, spec: tuple[str, ...], eng_cpu: tuple[str, ...] = ()) -> list[Built]:
    """spec 1.0+pw1 (a source build), eng 2.0 and eng-cpu 2.0 (the two variants)."""
    out = tmp_path / "wheels"
    files = {"x/__init__.py": b""}
    spec_wheel = support.make_wheel(out, "spec", "1.0+pw1", files, metadata=spec)
    eng_wheel = support.make_wheel(out, "eng", "2.0", files)
    # A copied upstream wheel lies in the cache under its sha256: the file name comes apart.
    blob = out / support.sha256(eng_wheel)
    eng_wheel.rename(blob)
    cpu_wheel = support.make_wheel(out, "eng-cpu", "2.0", files, metadata=eng_cpu)
    return [
        Built("spec", "1.0+pw1", spec_wheel, spec_wheel.name),
        Built("eng", "2.0", blob, "eng-2.0-py3-none-any.whl"),
        Built("eng-cpu", "2.0", cpu_wheel, cpu_wheel.name),
    ]


GOOD = (
    "Requires-Dist: requests>=2",
    "Provides-Extra: run",
    'Requires-Dist: eng==2.0; extra == "run"',
    "Provides-Extra: run-cpu",
    'Requires-Dist: eng-cpu==2.0; extra == "run-cpu"',
    'Requires-Dist: eng>=2; extra == "all" and sys_platform == "never"',
)


def test_a_consistent_set_passes(tmp_path: Path) -> None:
    check_built_set(target(tmp_path), built(tmp_path, GOOD, ("Requires-Dist: spec~=1.0",)))


def test_a_requirement_that_excludes_the_pinned_version_is_refused(tmp_path: Path) -> None:
    metadata = (*GOOD, 'Requires-Dist: eng==0.11.0; extra == "old"')
    with pytest.raises(BuildError) as info:
        check_built_set(target(tmp_path), built(tmp_path, metadata))
    message = str(info.value)
    assert "target t: the built wheels disagree with the target (nothing was written)" in message
    assert (
        'spec-1.0+pw1-py3-none-any.whl: Requires-Dist: eng==0.11.0; extra == "old" does not '
        "admit eng==2.0, the version this target pins" in message
    )
    assert (
        "Pin the extra to this target's build in patches/t/target.toml: "
        '[projects.spec.extras] old = ["<project>" or "<project>:<variant>"]'
    ) in message


def test_every_variant_and_every_marker_is_checked(tmp_path: Path) -> None:
    spec = (*GOOD, 'Requires-Dist: eng-cpu<2; platform_machine == "riscv64"')
    eng_cpu = ("Requires-Dist: spec==0.9",)
    with pytest.raises(BuildError) as info:
        check_built_set(target(tmp_path), built(tmp_path, spec, eng_cpu))
    message = str(info.value)
    assert "does not admit eng-cpu==2.0" in message
    assert (
        "eng_cpu-2.0-py3-none-any.whl: Requires-Dist: spec==0.9 does not admit spec==1.0+pw1"
        in (message)
    )
    assert message.count("does not admit") == 2
    # not an extra: the advice is a patch to the project's metadata
    assert "Patch the requirement in patches/t/spec/" in message
    assert "Patch the requirement in patches/t/eng/" in message


def test_a_url_requirement_on_a_built_project_is_refused(tmp_path: Path) -> None:
    spec = (*GOOD, "Requires-Dist: eng @ https://example.org/eng-2.0-py3-none-any.whl")
    with pytest.raises(BuildError, match=r"names a URL, but this target builds eng==2\.0"):
        check_built_set(target(tmp_path), built(tmp_path, spec))


def test_a_missing_extra_is_refused(tmp_path: Path) -> None:
    consumer = CONSUMER.replace("spec[run-cpu]", "spec[datagen-cpu]")
    with pytest.raises(BuildError) as info:
        check_built_set(target(tmp_path, consumer), built(tmp_path, GOOD))
    message = str(info.value)
    assert (
        "[consumer.cpu]: install spec[datagen-cpu]: spec-1.0+pw1-py3-none-any.whl has no "
        in message
    )
    assert "never installs eng-cpu, the cpu variant's wheel" in message


def test_an_install_that_pulls_the_other_variant_is_refused(tmp_path: Path) -> None:
    consumer = CONSUMER.replace("spec[run-cpu]", "spec[run-cpu,run]")
    with pytest.raises(BuildError) as info:
        check_built_set(target(tmp_path, consumer), built(tmp_path, GOOD))
    assert (
        "patches/t/target.toml [consumer.cpu]: spec-1.0+pw1-py3-none-any.whl: Requires-Dist: "
        "eng==2.0; extra == \"run\" pulls eng, the cuda variant's wheel (not cpu's)"
    ) in str(info.value)
