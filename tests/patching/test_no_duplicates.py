"""patches/ holds no two copies of the same change (issue 33).

Every pair of patch files under patches/ (targets' own series and pools) is compared by the
change it makes: per file, the lines it removes and adds, in order — line numbers, context and
headers aside. Two files making the same change are a duplicate unless they sit in one pool,
gated so that no committed target applies both (the same change written for two contexts, e.g.
0026 with and without 0007 before it).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from pathlib import Path

from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import POOLS_DIR, list_target_names, load_target
from patchwheel.patching.patches import parse_patch, strip_prefix
from patchwheel.patching.series import resolve
from tests import support

PATCHES = support.REPO_ROOT / "patches"


def change_of(path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What a patch changes: per file, its removed and added lines in order."""
    patch = parse_patch(path.name, path.read_bytes())
    out = []
    for pf in patch.files:
        name = strip_prefix(pf.target_file if pf.target_file != "/dev/null" else pf.source_file)
        lines = tuple(
            f"{line.line_type}{line.value}"
            for hunk in pf
            for line in hunk
            if line.line_type in ("+", "-")
        )
        out.append((name, lines))
    return tuple(sorted(out))


def patch_files() -> list[Path]:
    return sorted(PATCHES.glob("*/*/*.patch"))


def applied_together() -> set[frozenset[Path]]:
    """Pairs of pool patches some committed target applies both of."""
    pairs: set[frozenset[Path]] = set()
    for name in list_target_names(PATCHES):
        target = load_target(PATCHES, name)
        lock = locked_pins(target)
        for project in target.projects:
            applied = [project.series_dir / p.name for p in resolve(project, lock).patches]
            pairs |= {frozenset(pair) for pair in combinations(applied, 2)}
    return pairs


def test_the_repository_has_patches_and_a_pool() -> None:
    files = patch_files()
    assert len(files) > 30, files
    assert any(p.parent.parent.name == POOLS_DIR for p in files)


def test_no_two_patch_files_make_the_same_change_beyond_their_gates() -> None:
    by_change: dict[object, list[Path]] = defaultdict(list)
    for path in patch_files():
        by_change[change_of(path)].append(path)
    together = applied_together()
    duplicates = []
    for paths in by_change.values():
        for a, b in combinations(paths, 2):
            same_pool = a.parent == b.parent and a.parent.parent.name == POOLS_DIR
            if not same_pool or frozenset((a, b)) in together:
                duplicates.append(f"{a.relative_to(PATCHES)} = {b.relative_to(PATCHES)}")
    assert not duplicates, (
        "the same change twice (move it into the pool once, gated: patches/README.md): "
        + "; ".join(duplicates)
    )


def test_the_comparison_sees_a_copy_in_another_series(tmp_path: Path) -> None:
    """The check itself: a pool patch copied into a target's series is the same change, even
    with other line numbers and another header."""
    source = next(p for p in patch_files() if p.parent.parent.name == POOLS_DIR)
    text = source.read_text("utf-8")
    moved = "\n".join(
        line.replace("@@ -1", "@@ -9").replace("+1", "+9", 1) if line.startswith("@@") else line
        for line in text.split("\n")
    ).replace("Origin:", "Bug: copied\nOrigin:")
    copy = tmp_path / "vllm-9.9" / "speculators" / source.name
    copy.parent.mkdir(parents=True)
    copy.write_text(moved, "utf-8")
    assert change_of(copy) == change_of(source)
