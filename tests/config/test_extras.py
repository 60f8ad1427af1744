"""``[projects.P.extras]`` in target.toml: references parsed and checked, hostile input refused,
and pinned by the plan to the versions the target builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.building.plan import plan
from patchwheel.config.extras import ExtraRef, ExtraSpec
from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError
from patchwheel.wheels.extras import PinnedExtra
from tests.config.test_consumer import PROJECTS

SHA = "a" * 64


def write(tmp_path: Path, extras: str, projects: str = PROJECTS) -> Path:
    root = tmp_path / "patches"
    (root / "t").mkdir(parents=True, exist_ok=True)
    (root / "t" / "target.toml").write_text(projects + "\n[projects.spec.extras]\n" + extras)
    return root


def lock(spec_pin: str = "spec==1.0") -> dict[str, LockedPin]:
    entries = [
        LockedPin("spec", spec_pin, "sdist", SHA, "spec-1.0.tar.gz"),
        LockedPin("eng", "eng==2.0", "sdist", SHA, "eng-2.0.tar.gz"),
        LockedPin("eng:cuda", "eng==2.0", "wheel", SHA, "eng-2.0-py3-none-any.whl"),
        LockedPin("eng:cpu", "eng-cpu==2.0", "wheel", SHA, "eng_cpu-2.0-py3-none-any.whl"),
    ]
    return {e.key: e for e in entries}


def test_references_are_parsed_and_names_normalized(tmp_path: Path) -> None:
    root = write(tmp_path, 'Run = ["eng:cuda"]\nrun_CPU = ["eng:cpu"]\n')
    spec = load_target(root, "t").project("spec")
    assert spec.extras == (
        ExtraSpec("run", (ExtraRef("eng", "cuda"),)),
        ExtraSpec("run-cpu", (ExtraRef("eng", "cpu"),)),
    )


def test_the_plan_pins_each_reference_to_the_built_public_version(tmp_path: Path) -> None:
    root = write(tmp_path, 'run = ["eng:cuda"]\nrun-cpu = ["eng:cpu"]\n')
    entries = lock()
    entries["eng:cpu"] = LockedPin(
        "eng:cpu",
        "eng-cpu==2.1.dev3+g1a2b3c4.cpu",
        "wheel",
        SHA,
        "eng_cpu-2.1.dev3+g1a2b3c4.cpu-py3-none-any.whl",
        version="2.1.dev3+g1a2b3c4.cpu",
    )
    units = {u.name: u for u in plan(load_target(root, "t"), entries)}
    assert units["spec"].extras == (
        PinnedExtra("run", ("eng==2.0",)),
        PinnedExtra("run-cpu", ("eng-cpu==2.1.dev3",)),
    )
    assert set(units["spec"].distributions) == {"spec", "eng", "eng-cpu"}
    # the extras are in the spec build's key, and only there
    plain = {u.name: u for u in plan(load_target(write(tmp_path / "b", ""), "t"), entries)}
    assert plain["spec"].key != units["spec"].key
    assert plain["eng:cuda"].key == units["eng:cuda"].key


def test_a_reference_to_a_project_without_a_released_version_is_refused(tmp_path: Path) -> None:
    projects = (
        PROJECTS + '\n[projects.other]\nbuild = "source"\npin = "other @ git+https://x/o.git@v1"\n'
    )
    root = write(tmp_path, 'run = ["other"]\n', projects)
    entries = lock()
    entries["other"] = LockedPin(
        "other", "other @ git+https://x/o.git@v1", "git", commit="b" * 40, url="https://x/o.git"
    )
    with pytest.raises(ConfigError) as info:
        plan(load_target(root, "t"), entries)
    assert "target.toml [projects.spec.extras] run: other is pinned to other @ git+" in str(
        info.value
    )
    assert "names no released version to require" in str(info.value)


@pytest.mark.parametrize(
    ("extras", "message"),
    [
        ('"run!" = ["eng:cuda"]', "'run!' is not a valid extra name (PEP 685)"),
        ('run = "eng:cuda"', 'run must be a non-empty list of "project" or "project:variant"'),
        ("run = []", 'run must be a non-empty list of "project" or "project:variant"'),
        ('run = ["eng:cuda:x y"]', 'run: \'eng:cuda:x y\' is not "project" or "project:variant"'),
        ('run = ["nope"]', "run: nope is not another project of the target (it has: eng)"),
        ('run = ["spec"]', "run: spec is not another project of the target (it has: eng)"),
        ('run = ["eng:rocm"]', "run: eng has no variant 'rocm' (it has: cuda, cpu)"),
        ('run = ["eng"]', "run: eng has several variants; name one, e.g. eng:cuda"),
        ('run = ["eng:cuda"]\nRUN = ["eng:cpu"]', "the extra 'RUN' is given twice (as 'run')"),
    ],
)
def test_hostile_extras_are_refused_naming_the_table(
    tmp_path: Path, extras: str, message: str
) -> None:
    root = write(tmp_path, extras + "\n")
    with pytest.raises(ConfigError) as info:
        load_target(root, "t")
    assert "target.toml [projects.spec.extras]" in str(info.value)
    assert message in str(info.value)


def test_extras_must_be_a_table(tmp_path: Path) -> None:
    root = tmp_path / "patches"
    (root / "t").mkdir(parents=True)
    text = PROJECTS.replace('pin = "spec==1.0"\n', 'pin = "spec==1.0"\nextras = ["eng"]\n', 1)
    (root / "t" / "target.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"\[projects\.spec\.extras\]: must be a table"):
        load_target(root, "t")
