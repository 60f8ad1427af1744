"""Gates (Applies-When, Drop-When, Variants) on real format-patch output, resolved per target and
variant; pools in target.toml checked like any other input."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from patchwheel.building.plan import plan
from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError, PatchError
from patchwheel.patching.gates import parse_condition
from patchwheel.patching.series import resolve
from tests import support

SHA = "a" * 64
LINES = "".join(f"line {i}\n" for i in range(1, 31))
VERSIONS = {"eng": Version("0.34.0"), "spec": Version("1.0")}


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("eng >= 0.33.0", True),
        ("eng >=0.30,<0.40", True),
        ("eng >= 0.26.0, < 0.29.0", False),
        ("spec >= 2.0 or eng <= 0.11.0", False),
        ("spec >= 2.0 or eng > 0.11.0", True),
        ("spec == 1.0 and eng < 0.34", False),
        ("eng pin >= 0.34.0", True),  # the older `<project> pin <op> <version>`
        ("eng <= 0.11.0 or upstream: spec passes block_size, or does X", False),
        ("never", False),
    ],
)
def test_conditions_are_evaluated_on_the_pinned_versions(text: str, holds: bool) -> None:
    condition = parse_condition(text, "p:1", prose=True)
    assert condition.holds(VERSIONS, "p:1") is holds


@pytest.mark.parametrize(
    ("text", "prose", "message"),
    [
        ("eng >= banana", True, "is not a PEP 440 specifier set"),
        ("eng >= 1 and upstream: x", True, "must come last, after `or`"),
        ("upstream: done", False, "is for Drop-When only"),
        ("soon", False, "not `<project> <specifier>`"),
    ],
)
def test_a_malformed_gate_is_refused_naming_where(text: str, prose: bool, message: str) -> None:
    with pytest.raises(PatchError, match=r"^p:7: ") as info:
        parse_condition(text, "p:7", prose=prose)
    assert message in str(info.value)


def test_a_gate_on_a_project_the_target_does_not_pin_is_an_error() -> None:
    condition = parse_condition("vllm >= 0.29.0", "p:3", prose=False)
    with pytest.raises(PatchError, match=r"p:3: `vllm >= 0.29.0` names vllm, which the target"):
        condition.holds(VERSIONS, "p:3")
    # a Drop-When drops only what it knows: not true, no error
    drop = parse_condition("vllm >= 0.29.0 or upstream: x", "p:3", prose=True)
    assert drop.holds(VERSIONS, "p:3", strict=False) is False
    assert drop.holds({"vllm": None}, "p:3", strict=False) is False


# --------------------------------------------------------------------------- targets


def patch_file(tmp_path: Path, name: str, line: int, headers: str) -> bytes:
    """A real format-patch changing line ``line`` of a.txt, with ``headers`` in its message."""
    repo = tmp_path / f"repo-{name}"
    repo.mkdir()
    (repo / "a.txt").write_text(LINES)
    support.run_git(repo, "init", "-q")
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", "base")
    (repo / "a.txt").write_text(LINES.replace(f"line {line}\n", f"changed {line}\n"))
    message = f"change {line}\n\nOrigin: test\nForwarded: no\n{headers}"
    support.run_git(repo, "commit", "-q", "-am", message)
    out = support.run_git(repo, "format-patch", "--zero-commit", "--stdout", "-1")
    return (out + "\n").encode()


def write_target(root: Path, name: str, body: str) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "target.toml").write_text(body)


def write_series(folder: Path, patches: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in patches.items():
        (folder / name).write_bytes(data)
    (folder / "series").write_text("# a comment\n" + "\n".join(patches) + "\n")


TARGET = """
[projects.spec]
build = "source"
pin = "spec==1.0"
{pool}
[projects.eng]
build = "overlay"
pin = "eng=={eng}"
[projects.eng.variants.cuda]
pin = "eng=={eng}"
[projects.eng.variants.cpu]
pin = "eng-cpu=={eng}"
"""


def lock(eng: str) -> dict[str, LockedPin]:
    entries = [
        LockedPin("spec", "spec==1.0", "sdist", SHA, "spec-1.0.tar.gz"),
        LockedPin("eng", f"eng=={eng}", "sdist", SHA, f"eng-{eng}.tar.gz"),
        LockedPin("eng:cuda", f"eng=={eng}", "wheel", SHA, f"eng-{eng}-py3-none-any.whl"),
        LockedPin("eng:cpu", f"eng-cpu=={eng}", "wheel", SHA, f"eng_cpu-{eng}-py3-none-any.whl"),
    ]
    return {e.key: e for e in entries}


@pytest.fixture
def pooled(tmp_path: Path) -> Path:
    """Two targets sharing pool spec-1.0 (eng 0.26.0 and 0.32.0), one cpu-only eng patch."""
    root = tmp_path / "patches"
    write_series(
        root / "pools" / "spec-1.0",
        {
            "0001-always.patch": patch_file(
                tmp_path, "a", 2, "Drop-When: upstream: spec does it\n"
            ),
            "0002-new-eng.patch": patch_file(
                tmp_path, "b", 10, "Drop-When: spec >= 2.0\nApplies-When: eng >= 0.29.0\n"
            ),
            "0003-old-eng.patch": patch_file(
                tmp_path, "c", 20, "Drop-When: eng >= 0.29.0 or upstream: spec does it\n"
            ),
        },
    )
    for name, eng in (("old", "0.26.0"), ("new", "0.32.0")):
        write_target(root, name, TARGET.format(pool='pool = "spec-1.0"', eng=eng))
        write_series(
            root / name / "eng",
            {
                "0001-cpu.patch": patch_file(
                    tmp_path, f"cpu-{name}", 5, "Drop-When: never\nVariants: cpu\n"
                )
            },
        )
    return root


def test_each_target_resolves_the_pool_by_its_gates(pooled: Path) -> None:
    old = resolve(load_target(pooled, "old").project("spec"), lock("0.26.0"))
    new = resolve(load_target(pooled, "new").project("spec"), lock("0.32.0"))
    assert [p.name for p in old.patches] == ["0001-always.patch", "0003-old-eng.patch"]
    assert [p.name for p in new.patches] == ["0001-always.patch", "0002-new-eng.patch"]
    assert old.pool == new.pool == "spec-1.0"
    why = {e.patch.name: e.why for e in new.entries if not e.applied}
    assert why == {
        "0003-old-eng.patch": "Drop-When `eng >= 0.29.0 or upstream: spec does it` holds"
    }
    assert any(
        "- 0002-new-eng.patch: Applies-When `eng >= 0.29.0` does not hold" in line
        for line in old.lines()
    )


def test_a_variant_scoped_patch_reaches_only_its_variants_wheel(pooled: Path) -> None:
    target = load_target(pooled, "new")
    units = {u.name: u for u in plan(target, lock("0.32.0"))}
    assert [p.name for p in units["eng:cpu"].patches] == ["0001-cpu.patch"]
    assert units["eng:cuda"].patches == ()
    assert [p.name for p in units["eng:cuda"].tree_patches] == ["0001-cpu.patch"]
    assert [p.name for p in units["spec"].patches] == ["0001-always.patch", "0002-new-eng.patch"]
    entry = units["eng:cpu"].series.to_json()["patches"][0]  # type: ignore[union-attr]
    assert entry == {"name": "0001-cpu.patch", "applied": True, "variants": ["cpu"]}


def test_a_variant_gone_leaves_its_patch_out_and_says_why(pooled: Path) -> None:
    body = TARGET.format(pool='pool = "spec-1.0"', eng="0.34.0").split(
        "[projects.eng.variants.cpu]"
    )[0]
    write_target(pooled, "cudaonly", body)
    write_series(
        pooled / "cudaonly" / "eng",
        {"0001-cpu.patch": (pooled / "new" / "eng" / "0001-cpu.patch").read_bytes()},
    )
    resolved = resolve(load_target(pooled, "cudaonly").project("eng"), lock("0.34.0"))
    assert resolved.patches == ()
    assert (
        "for variant(s) cpu, which the target does not build (it builds cuda)"
        in resolved.entries[0].why
    )


def test_variants_on_a_source_projects_patch_is_refused_naming_its_line(pooled: Path) -> None:
    pool = pooled / "pools" / "spec-1.0"
    data = (
        (pool / "0001-always.patch")
        .read_bytes()
        .replace(b"Drop-When:", b"Variants: cpu\nDrop-When:")
    )
    (pool / "0001-always.patch").write_bytes(data)
    line = data.decode().splitlines().index("Variants: cpu") + 1
    with pytest.raises(PatchError, match=rf"0001-always.patch:{line}: .*`Variants:` is for"):
        resolve(load_target(pooled, "new").project("spec"), lock("0.32.0"))


def test_a_malformed_gate_in_a_pool_names_the_file_and_line(pooled: Path) -> None:
    pool = pooled / "pools" / "spec-1.0"
    data = (pool / "0002-new-eng.patch").read_bytes().replace(b"eng >= 0.29.0", b"eng >= 0.29.x")
    (pool / "0002-new-eng.patch").write_bytes(data)
    line = data.decode().splitlines().index("Applies-When: eng >= 0.29.x") + 1
    with pytest.raises(PatchError, match=rf"spec-1.0/0002-new-eng.patch:{line}: malformed gate"):
        resolve(load_target(pooled, "new").project("spec"), lock("0.32.0"))


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ('pool = "spec-2.0"', 'is not this pin\'s: spec==1.0 uses pool = "spec-1.0"'),
        ('pool = "../../etc"', "is not this pin's"),
        ("pool = 3", "is not this pin's"),
    ],
)
def test_a_pool_must_be_the_pins_own(pooled: Path, pool: str, message: str) -> None:
    write_target(pooled, "bad", TARGET.format(pool=pool, eng="0.32.0"))
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_target(pooled, "bad")


def test_a_pool_and_an_own_series_together_are_refused(pooled: Path) -> None:
    write_series(pooled / "new" / "spec", {"0001-x.patch": b"x"})
    with pytest.raises(ConfigError, match=r"both pool spec-1\.0 and .* hold a series of spec"):
        load_target(pooled, "new")


def test_a_missing_pool_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "patches"
    write_target(root, "t", TARGET.format(pool='pool = "spec-1.0"', eng="0.32.0"))
    with pytest.raises(ConfigError, match=r"pool spec-1\.0: .*pools/spec-1\.0 does not exist"):
        load_target(root, "t")
