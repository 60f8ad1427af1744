"""Hostile and mistaken input is refused with a message naming it, before any audit runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.bisect import bisect_target, history
from patchwheel.bisect.checkout import Checkout
from patchwheel.bisect.run import channel_repo
from patchwheel.errors import BisectError, ConfigError
from patchwheel.upstream.cache import Cache
from tests import support
from tests.bisect import _history


def bisect(setup: _history.Setup, good: str, bad: str, **kw: object) -> None:
    kw.setdefault("repo", setup.history.repo)
    bisect_target(
        _history.workspace(setup),
        Cache(setup.cache),
        str(kw.pop("target", "old")),
        good=good,
        bad=bad,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("good", "message"),
    [
        ("--upload-pack=touch /tmp/pwned", "looks like an option"),
        ("-h", "looks like an option"),
        ("v0.1.0..v0.2.0", "not a plain revision name"),
        ("v0.2.0~3", "not a plain revision name"),
        ("main@{1}", "not a plain revision name"),
        ("v0.1.0 v0.2.0", "not a plain revision name"),
        ("", "empty"),
        ("v9.9.9", "no such commit"),
        ("0" * 40, "no such commit"),
    ],
)
def test_bad_revisions(setup: _history.Setup, good: str, message: str) -> None:
    with pytest.raises(BisectError, match=message) as raised:
        bisect(setup, good, "v0.2.0")
    assert "--good" in str(raised.value)


def test_a_range_must_run_forward_on_the_main_line(setup: _history.Setup) -> None:
    h = setup.history
    with pytest.raises(BisectError, match="same commit"):
        bisect(setup, "v0.2.0", h.commits[_history.BAD])
    with pytest.raises(BisectError, match="swap them"):
        bisect(setup, "v0.2.0", "v0.1.0")
    with pytest.raises(BisectError, match="not on its first-parent chain"):
        bisect(setup, h.side[0], "v0.2.0")  # merged from a side branch
    with pytest.raises(BisectError, match="not an ancestor") as raised:
        bisect(setup, h.release, "v0.2.0")  # a release branch's own commit
    assert h.commits[5][:12] in str(raised.value)  # where that branch left the main line


def test_a_repository_that_is_none(setup: _history.Setup, tmp_path: Path) -> None:
    with pytest.raises(BisectError, match="not a git repository"):
        bisect(setup, "v0.1.0", "v0.2.0", repo=tmp_path)
    with pytest.raises(BisectError, match="no such directory"):
        bisect(setup, "v0.1.0", "v0.2.0", repo=tmp_path / "missing")
    with pytest.raises(BisectError, match="pass --repo"):
        bisect(setup, "v0.1.0", "v0.2.0", repo=None)


def test_ends_of_two_kinds_projects_and_targets(setup: _history.Setup) -> None:
    with pytest.raises(
        BisectError, match="must both be revisions of a repository or both releases"
    ):
        bisect(setup, "vllm==0.1.0", "v0.2.0")
    with pytest.raises(BisectError, match=r"^--good: pin 'vllm==latest'"):
        bisect(setup, "vllm==latest", "vllm==0.2.0")
    with pytest.raises(BisectError, match="--project 'torch'"):
        bisect(setup, "v0.1.0", "v0.2.0", project="torch")
    with pytest.raises(ConfigError, match="no target 'nope'"):
        bisect(setup, "v0.1.0", "v0.2.0", consumer_target="nope")


def test_a_channel_repository_in_target_toml(setup: _history.Setup) -> None:
    """Issue 24: the channel's ``repository`` (the key target.toml and the roll read) stands in
    for --repo; bisect looked for ``repo`` or ``git``, which target.toml refuses."""
    toml = setup.root / "patches" / "old" / "target.toml"
    text = toml.read_text()
    workspace = _history.workspace(setup)
    cache = Cache(setup.cache)
    try:
        channel = (
            '\n[projects.vllm.channel]\nindex = "https://wheels.example.org/"\n'
            f'repository = "{setup.history.repo.as_uri()}"\n'
        )
        toml.write_text(text + channel)
        assert channel_repo(workspace, "old", "vllm", cache) == setup.history.repo
        # a remote repository is used through its mirror in the cache, once a roll made it
        remote = "https://git.example.org/vllm.git"
        toml.write_text(text + channel.replace(setup.history.repo.as_uri(), remote))
        with pytest.raises(BisectError, match=f"repository {remote} has no local mirror"):
            channel_repo(workspace, "old", "vllm", cache)
        # the key README once named is refused by target.toml, naming it
        toml.write_text(text + channel.replace("repository = ", "repo = "))
        with pytest.raises(ConfigError, match=r"unknown key\(s\) \['repo'\]"):
            channel_repo(workspace, "old", "vllm", cache)
    finally:
        toml.write_text(text)


def test_revisions_and_provenance(setup: _history.Setup) -> None:
    h = setup.history
    git_dir = history.open_repository(h.repo)
    chain = history.first_parent_range(git_dir, h.commits[0], h.commits[_history.BAD])
    assert [r.id for r in chain] == h.commits[: _history.BAD + 1]
    assert chain[_history.ADDED].pr == 1023
    assert chain[_history.MERGE].parent == h.commits[_history.MERGE - 1]  # first parent
    assert history.Revision("x", "", "Fix (#12) and (#345)").pr == 345
    assert history.Revision("x", "", "no number").pr is None
    at_bad = history.provenance(git_dir, h.repo, h.commits[_history.BAD])
    assert at_bad["later_on_main_line"] == _history.NEWEST - _history.BAD
    at_tip = history.provenance(git_dir, h.repo, h.commits[_history.NEWEST])
    assert at_tip["later_on_main_line"] == 0


def test_one_sparse_checkout_reused(setup: _history.Setup, tmp_path: Path) -> None:
    git_dir = history.open_repository(setup.history.repo)
    first = Checkout(git_dir, tmp_path, ("vllm",))
    first.prepare()
    first.checkout(setup.history.commits[_history.ADDED])
    assert (first.path / "vllm" / "v1" / "executor.py").is_file()
    assert not (first.path / "docs").exists()  # sparse: only the package
    assert not (first.path / ".git" / "refs" / "heads" / "main").exists()  # borrows objects
    marker = first.path / ".git" / "kept"
    marker.write_text("")
    again = Checkout(git_dir, tmp_path, ("vllm",))
    again.prepare()
    assert again.path == first.path and marker.is_file()
    assert again.head == setup.history.commits[_history.ADDED]
    again.checkout(setup.history.commits[_history.APPEARS])
    assert "eos_token_id" not in (again.path / "vllm" / "v1" / "request.py").read_text()
    with pytest.raises(BisectError, match="cannot check out"):
        again.checkout("f" * 40)


def test_a_step_that_cannot_be_audited_names_its_commit(
    setup: _history.Setup, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    support.run_git(tmp_path, "clone", "-q", str(setup.history.repo), str(broken))
    support.run_git(broken, "rm", "-q", "-r", "vllm")
    support.run_git(broken, "commit", "-q", "-m", "Move the package away (#9999)")
    with pytest.raises(BisectError, match=r"the audit at [0-9a-f]{40} \(Move the package away"):
        bisect(setup, "v0.1.0", "HEAD", repo=broken)
