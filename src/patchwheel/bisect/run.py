"""Bisect a target: find the first upstream commit where each audit finding flips.

The patched consumer of a target (its vendor tree) is audited against the provider's *sources*
at each step of the provider's history — no wheel is built — with the target's own provider as
the baseline, so a finding at a step is drift between the target's provider and that step.
Findings at good and at bad are compared: each one present at exactly one end is bisected to the
first commit where it flips (the consumer breaks there, or the upstream change a patch answers
lands there); findings present at both ends are reported as unchanged in the range.

``--project speculators`` bisects the consumer's own history instead, against the target's
provider (baseline: the provider version the consumer declares at good).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from rich.console import Console

from patchwheel import atomic
from patchwheel import console as pw_console
from patchwheel.audit.engine import Engine, MypyEngine
from patchwheel.audit.layout import declared_pin, top_level_packages
from patchwheel.audit.report import Finding
from patchwheel.audit.signatures import changes as signature_changes
from patchwheel.audit.target import CONSUMER, PROVIDER
from patchwheel.bisect import attribution, history
from patchwheel.bisect.checkout import Checkout, GitTrees
from patchwheel.bisect.probe import FindingKey, Prober, Side, StepRecord, Trees, View
from patchwheel.bisect.releases import ReleaseTrees, release_pin
from patchwheel.bisect.report import BisectReport, FlipResult, Subject
from patchwheel.bisect.search import Search
from patchwheel.building.run import vendor_trees
from patchwheel.config.targets import TARGET_FILE, load_target
from patchwheel.errors import BisectError
from patchwheel.index import outputs
from patchwheel.portable import portable, roots
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.gitsrc import mirror_key
from patchwheel.upstream.sources import source_tree
from patchwheel.workspace import Workspace

REPORT_JSON = "bisect.json"
REPORT_MD = "bisect.md"


def bisect_target(
    workspace: Workspace,
    cache: Cache,
    target_name: str,
    *,
    project: str = PROVIDER,
    good: str,
    bad: str,
    repo: Path | None = None,
    consumer_target: str | None = None,
    baseline: str | None = None,
    engine: Engine | None = None,
    console: Console | None = None,
    command: str | None = None,
) -> BisectReport:
    """Bisect `project`'s history from `good` to `bad` against a target's patched consumer.

    `good`/`bad` are revisions of the repository (`repo`, else the target's channel) or, both
    written ``name==version``, releases of the project on the package index. The consumer is
    `consumer_target`'s (default: the target's own) patched vendor tree and the baseline its
    provider (`baseline`: a pin or directory instead).
    """
    start = time.monotonic()
    out = console or pw_console.stderr
    target = load_target(workspace.patches, target_name)
    if project not in (PROVIDER, CONSUMER):
        raise BisectError(
            f"--project {project!r}: bisect follows the provider ({PROVIDER}) or the consumer "
            f"({CONSUMER}) of the audit"
        )
    target.project(project)
    moving: Side = "provider" if project == PROVIDER else "consumer"
    good_release, bad_release = release_pin(good, "--good"), release_pin(bad, "--bad")
    if (good_release is None) != (bad_release is None):
        raise BisectError(
            "--good and --bad must both be revisions of a repository or both releases "
            f"(`{project}==X.Y.Z`), not one of each"
        )
    consumer_name = consumer_target or target_name
    if consumer_name != target_name:
        load_target(workspace.patches, consumer_name)
    # The range first: a bad revision is refused before any tree is prepared.
    releases: ReleaseTrees | None = None
    if good_release is not None and bad_release is not None:
        releases = ReleaseTrees(project, good_release, bad_release, cache)
        repo_path, git_dir, revisions = None, None, releases.revisions
    else:
        repo_path = (
            repo if repo is not None else channel_repo(workspace, target_name, project, cache)
        )
        git_dir = history.open_repository(repo_path)
        good_commit = history.resolve(git_dir, good, "--good")
        bad_commit = history.resolve(git_dir, bad, "--bad")
        revisions = history.first_parent_range(git_dir, good_commit, bad_commit)
    out.print(
        f"bisect {target_name}: {project} {revisions[0].short}..{revisions[-1].short}, "
        f"{len(revisions) - 1} step(s) after good"
    )
    trees = vendor_trees(consumer_name, workspace, cache)
    for name in (CONSUMER, PROVIDER):
        if name not in trees:
            raise BisectError(f"target {consumer_name!r} has no {name} project to audit")
    packages = tuple(d.name for d in top_level_packages(trees[project]))
    engine = engine or MypyEngine(cache_dir=cache.root / "audit")
    with workspace.locked(f"{target_name}.bisect"):
        source: Trees
        if releases is not None:
            source, mode = releases, "releases"
            where = f"{project} releases on the package index"
        else:
            assert git_dir is not None and repo_path is not None
            checkout = Checkout(git_dir, workspace.work_dir(target_name, "bisect"), packages)
            checkout.prepare()
            source, mode = GitTrees(checkout, revisions, repo_path), "git"
            where = f"{project} sources at each commit of {repo_path} (checkout {checkout.path})"
        baseline_root, baseline_label = _baseline(
            baseline, moving, trees, source, consumer_name, cache
        )
        fixed = trees[PROVIDER] if moving == "consumer" else trees[CONSUMER]
        found = bisect_trees(
            source,
            moving=moving,
            fixed=fixed,
            baseline=baseline_root,
            packages=packages,
            engine=engine,
            console=out,
            label=target_name,
            patch_of=attribution.patch_of(
                moving,
                trees[CONSUMER],
                attribution.target_series(workspace.patches, consumer_name, CONSUMER),
            ),
        )
    fixed_label = (
        f"{CONSUMER} (patched, target {consumer_name}): {trees[CONSUMER]}"
        if moving == "provider"
        else f"{PROVIDER} (patched, target {consumer_name}): {trees[PROVIDER]}"
    )
    return BisectReport(
        target=target_name,
        consumer_target=consumer_name,
        project=project,
        moving=moving,
        mode=mode,
        good=source.revisions[0],
        bad=source.revisions[-1],
        steps=len(source.revisions) - 1,
        consumer=fixed_label if moving == "provider" else where,
        provider=where if moving == "provider" else fixed_label,
        baseline=baseline_label,
        source=source.provenance(),
        engine=f"{engine.name} {engine.version}",
        at_good=found.at_good,
        at_bad=found.at_bad,
        flips=found.flips,
        unchanged=found.unchanged,
        runs=found.runs,
        seconds=time.monotonic() - start,
        command=command,
    )


def _baseline(
    baseline: str | None,
    moving: Side,
    trees: dict[str, Path],
    source: Trees,
    consumer_name: str,
    cache: Cache,
) -> tuple[Path, str]:
    """The baseline tree and its label: given, the target's provider, or what good declares."""
    if baseline is not None:
        if Path(baseline).is_dir():
            return Path(baseline), baseline
        return source_tree(baseline, cache), baseline
    if moving == "provider":
        return trees[PROVIDER], f"{PROVIDER} (patched, target {consumer_name}): {trees[PROVIDER]}"
    pin = declared_pin(source.tree(0), PROVIDER)
    return source_tree(pin, cache), f"{pin} (declared by {CONSUMER} at good)"


def channel_repo(workspace: Workspace, target_name: str, project: str, cache: Cache) -> Path:
    """The git repository of the project's channel in target.toml: ``[projects.P.channel]
    repository``, the key the roll reads too (a git URL, checked when target.toml is read).

    A ``file://`` URL is the repository itself; a remote one is used through the mirror in
    patchwheel's cache (a roll fetches it).
    """
    target = load_target(workspace.patches, target_name)
    channel = target.project(project).channel
    if channel is None:
        raise BisectError(
            f"target {target_name!r} names no git repository for {project} (no "
            f"[projects.{project}.channel] repository in {target.root / TARGET_FILE}): pass "
            f"--repo PATH, a clone of {project}'s repository"
        )
    url = channel.repository
    parts = urlsplit(url)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    for key in (mirror_key(url), mirror_key(f"git+{url}")):
        if (cache.git_path(key) / "HEAD").is_file():
            return cache.git_path(key)
    raise BisectError(
        f"the {project} channel's repository {url} has no local mirror in {cache.root} yet "
        "(a roll fetches it): pass --repo PATH, a local clone"
    )


@dataclass
class Found:
    """What the search found, before the report's labels are added."""

    at_good: list[Subject]
    at_bad: list[Subject]
    flips: list[FlipResult]
    unchanged: list[Subject]
    runs: list[StepRecord]


def bisect_trees(
    source: Trees,
    *,
    moving: Side,
    fixed: Path,
    baseline: Path,
    packages: tuple[str, ...],
    engine: Engine,
    console: Console,
    label: str,
    patch_of: Callable[[Finding], str | None] | None = None,
) -> Found:
    """Audit the ends, then bisect every finding that differs; `patch_of` names the target's
    series patch a finding concerns."""
    prober = Prober(
        source,
        moving=moving,
        fixed=fixed,
        baseline=baseline,
        packages=packages,
        engine=engine,
        console=console,
        label=label,
    )
    last = len(source.revisions) - 1
    search: Search[FindingKey] = Search(last, prober)
    good_keys, bad_keys = search.ends()
    changed = sorted(good_keys ^ bad_keys)
    if changed:
        console.print(
            f"bisect {label}: {len(changed)} finding(s) differ between good and bad; "
            f"{last} step(s), about {max(1, last.bit_length())} run(s) each, shared"
        )
    flips = search.run(changed)

    def subject(key: FindingKey, step: int) -> Subject:
        finding = prober.finding(step, key)
        assert finding is not None
        return _subject(key, finding, patch_of)

    results = []
    for flip in sorted(flips, key=lambda f: (f.first, f.key)):
        present = flip.first - 1 if flip.at_good else flip.first
        finding = prober.finding(present, flip.key)
        assert finding is not None
        old = prober.side(flip.first - 1, flip.key, finding)
        new = prober.side(flip.first, flip.key, finding)
        revision = source.revisions[flip.first]
        results.append(
            FlipResult(
                subject=_subject(flip.key, finding, patch_of),
                change="disappears" if flip.at_good else "appears",
                commit=revision,
                parent=source.revisions[flip.first - 1],
                position=flip.first,
                old=old.text,
                new=new.text,
                changes=_changes(old, new, finding),
                audit_runs=flip.runs,
                probes=tuple(source.revisions[s].id for s in flip.probes),
            )
        )
        console.print(
            f"  {flip.key}: {results[-1].change} at {revision.short} {revision.date[:10]} "
            f"{revision.subject[:70]} ({flip.runs} run(s))"
        )
    return Found(
        at_good=[subject(k, 0) for k in sorted(good_keys)],
        at_bad=[subject(k, last) for k in sorted(bad_keys)],
        flips=results,
        unchanged=[subject(k, last) for k in sorted(good_keys & bad_keys)],
        runs=list(prober.records),
    )


def _subject(
    key: FindingKey, finding: Finding, patch_of: Callable[[Finding], str | None] | None
) -> Subject:
    patch = patch_of(finding) if patch_of is not None else None
    return Subject(
        key=key,
        symbol=finding.symbol,
        location=finding.location,
        source=finding.source,
        message=finding.message,
        patch=patch,
    )


def _changes(old: View, new: View, finding: Finding) -> tuple[str, ...]:
    """The change at the commit, in words."""
    a, b = old.provider, new.provider
    name = finding.symbol.rsplit(".", 1)[-1]
    if a is None or b is None:
        gone = new.text.startswith("(no ")
        return ("the consumer no longer makes this use" if gone else "the consumer's line changed",)
    if not a.exists and b.exists:
        return (f"{name} was added",)
    if a.exists and not b.exists:
        return (f"{name} was removed (or moved)",)
    return signature_changes(a, b)


def store_report(
    workspace: Workspace, report: BisectReport, copy_to: Path | None = None
) -> list[Path]:
    """Write bisect.json and bisect.md into build/<target> (and `copy_to`, when given).

    build/<target> is the target's output link; without one (a target never built) the report
    gets a store of its own, linked the same way, which the next build replaces.
    """
    build = workspace.build
    current = outputs.current(build, report.target)
    if current is None:
        build.mkdir(parents=True, exist_ok=True)
        store = outputs.new_store(build, report.target, "bisect" + "0" * 10)
        outputs.activate(build, report.target, store)
    # No path of this machine in a report: the checkout's relative, the repository's by name.
    repo = report.source.get("path") if isinstance(report.source, dict) else None
    table = roots(workspace.patches.parent, [(Path(repo) if repo else None, "$REPO")])
    written = []
    for directory in (workspace.target_dir(report.target), copy_to):
        if directory is None:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        atomic.write_text(directory / REPORT_JSON, portable(report.to_json(), table))
        atomic.write_text(directory / REPORT_MD, portable(report.to_markdown(), table))
        written += [directory / REPORT_JSON, directory / REPORT_MD]
    return written
