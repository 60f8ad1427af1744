"""target.toml's ``generation``, ``[audit]`` and a project's ``always-build``: parsed, checked,
hostile values refused naming the key, and the build key moved only where they are set."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.building.plan import plan
from patchwheel.config.audit import AuditSpec
from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError
from tests.config.test_consumer import PROJECTS
from tests.config.test_extras import lock

SPEC_ENG = '\n[audit]\nprovider = "eng"\nconsumers = ["spec"]\n'
PLUGIN = """
[projects.plug]
build = "source"
pin = "plug==0.5"
"""


def write(tmp_path: Path, head: str = "", tail: str = "", projects: str = PROJECTS) -> Path:
    root = tmp_path / "patches"
    (root / "t").mkdir(parents=True, exist_ok=True)
    (root / "t" / "target.toml").write_text(head + projects + PLUGIN + tail)
    return root


def test_the_defaults_are_todays_targets(tmp_path: Path) -> None:
    target = load_target(write(tmp_path), "t")
    assert target.generation == "generator"
    assert target.audit == AuditSpec("vllm", ("speculators",), None, declared=False)
    assert not any(p.always_build for p in target.projects)


def test_a_served_target_with_two_consumers_and_a_baseline(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        head='generation = "served"\n',
        tail='\n[audit]\nprovider = "eng"\nconsumers = ["spec", "plug"]\nbaseline = "eng==1.9"\n',
    )
    target = load_target(root, "t")
    assert target.generation == "served"
    assert target.audit == AuditSpec("eng", ("spec", "plug"), "eng==1.9", declared=True)


@pytest.mark.parametrize(
    ("head", "tail", "says"),
    [
        ('generation = "server"\n', "", "generation must be"),
        ("generation = 2\n", "", "generation must be"),
        ("", '\n[audit]\nprovider = "nope"\n', "provider 'nope' is not a project"),
        ("", '\n[audit]\nprovider = "eng"\nconsumers = ["spec", "ghost"]\n', "'ghost'"),
        ("", '\n[audit]\nprovider = "eng"\nconsumers = ["eng"]\n', "against itself"),
        ("", '\n[audit]\nprovider = "eng"\nconsumers = []\n', "list of project names"),
        ("", '\n[audit]\nprovider = "eng"\nconsumers = ["spec", "spec"]\n', "twice"),
        ("", f'{SPEC_ENG}baseline = "other==1.0"\n', "not the provider"),
        ("", f'{SPEC_ENG}baseline = "eng=1.0 ; rm -rf"\n', "baseline"),
        ("", f'{SPEC_ENG}basline = "eng==1.0"\n', "unknown key"),
        ("", "\n[projects.plug.extra]\n", "unknown key"),
    ],
)
def test_hostile_values_are_refused_naming_the_key(
    tmp_path: Path, head: str, tail: str, says: str
) -> None:
    root = write(tmp_path, head=head, tail=tail)
    with pytest.raises(ConfigError, match=r"target\.toml") as raised:
        load_target(root, "t")
    assert says in str(raised.value)


def test_always_build_is_for_source_projects_and_moves_only_its_own_key(tmp_path: Path) -> None:
    entries = lock()
    entries["plug"] = LockedPin("plug", "plug==0.5", "sdist", "b" * 64, "plug-0.5.tar.gz")
    plain = {u.name: u.key for u in plan(load_target(write(tmp_path / "a"), "t"), entries)}
    always = PLUGIN.replace('pin = "plug==0.5"', 'pin = "plug==0.5"\nalways-build = true')
    root = tmp_path / "c" / "patches"
    (root / "t").mkdir(parents=True)
    (root / "t" / "target.toml").write_text(PROJECTS + always)
    built = load_target(root, "t")
    assert built.project("plug").always_build is True
    keys = {u.name: u.key for u in plan(built, entries)}
    assert keys["plug"] != plain["plug"]
    assert {k: v for k, v in keys.items() if k != "plug"} == {
        k: v for k, v in plain.items() if k != "plug"
    }

    (root / "t" / "target.toml").write_text(PROJECTS + always.replace("= true", "= 1"))
    with pytest.raises(ConfigError, match="always-build must be true or false"):
        load_target(root, "t")
    overlay = PROJECTS.replace('pin = "eng==2.0"\n', 'pin = "eng==2.0"\nalways-build = true\n', 1)
    (root / "t" / "target.toml").write_text(overlay + PLUGIN)
    with pytest.raises(ConfigError, match="always-build is for source projects"):
        load_target(root, "t")
