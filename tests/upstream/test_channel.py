"""Nightly channels: builds found on an index shaped like wheels.vllm.ai, served on loopback, and
their commits expanded in a local repository shaped like vLLM's. Index pages are hostile."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import git
import pytest

from patchwheel.config.targets import Project, load_target
from patchwheel.errors import ConfigError, FetchError, HashMismatchError
from patchwheel.upstream import channel_index, gitsrc, simple_api
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.channel import find_build
from patchwheel.upstream.channel_index import read_page
from patchwheel.upstream.fetch import fetch_url
from tests import channel_support as cs
from tests import support


class World:
    """A vLLM-shaped repository, its channel with two nightlies, served on loopback."""

    def __init__(self, tmp: Path, server: cs.ChannelServer, channel: cs.Channel) -> None:
        self.tmp = tmp
        self.server = server
        self.channel = channel
        self.repo = channel.repo
        self.cache = Cache(tmp / "cache")

    def project(
        self,
        extra: str = "",
        *,
        index: str | None = None,
        variants: str = 'cuda = { path = "", local = "" }',
    ) -> Project:
        first = self.channel.builds[0]
        base = self.server.url
        text = f"""\
            [projects.vllm]
            build = "overlay"
            pin = "vllm @ git+{self.repo.as_uri()}@{first.commit}"

            [projects.vllm.variants.cuda]
            pin = "vllm @ {first.url(base)}"

            [projects.vllm.variants.cpu]
            pin = "vllm @ {first.url(base, "cpu")}"

            [projects.vllm.channel]
            index = "{index or base}"
            repository = "{self.repo.as_uri()}"
            {extra}

            [projects.vllm.channel.variants]
            {variants}
            """
        root = self.tmp / "patches" / "t"
        root.mkdir(parents=True, exist_ok=True)
        (root / "target.toml").write_text(textwrap.dedent(text))
        return load_target(self.tmp / "patches", "t").project("vllm")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    repo = cs.make_vllm_repo(tmp_path / "vllm")
    channel = cs.Channel(tmp_path / "www", repo)
    first = cs.commit(repo, {"vllm/extra.py": "X = 1\n"}, "[Misc] add extra (#40001)")
    channel.publish(first, 1)
    second = cs.commit(repo, {"vllm/extra.py": "X = 2\n"}, "[Misc] change extra (#40002)")
    channel.publish(second, 2)
    server = cs.ChannelServer(tmp_path / "www")
    with server.running():
        yield World(tmp_path, server, channel)


def test_newest_build_and_its_full_commit(world: World) -> None:
    project = world.project()
    build = find_build(project, world.cache)
    newest = world.channel.builds[1]
    assert build.commit == newest.commit and build.version == newest.version
    assert build.version.startswith("0.33.1rc1.dev2+g") and len(build.commit) == 40
    assert set(build.wheels) == {"cuda", "cpu"}
    cpu = build.wheels["cpu"]
    assert cpu.filename == newest.wheels["cpu"].name and cpu.filename.count(".cpu-cp38") == 1
    assert cpu.url == newest.url(world.server.url, "cpu")  # the %2B stays quoted
    assert "%2B" in cpu.url and cpu.sha256 is None  # the pages carry no hashes
    assert "/nightly/vllm/" in world.server.requests
    path = fetch_url(cpu.url, None, world.cache, what="cpu wheel")
    assert path.name == support.sha256(newest.wheels["cpu"])
    # the mirror knew nothing: it was fetched once to expand the label
    assert (
        gitsrc.expand_commit(
            gitsrc.mirror_repo(world.repo.as_uri(), world.cache), newest.commit[:9], what="x"
        )
        == newest.commit
    )


def test_a_given_version_or_commit(world: World) -> None:
    project = world.project()
    first = world.channel.builds[0]
    assert find_build(project, world.cache, to=first.version).commit == first.commit
    assert find_build(project, world.cache, to=first.commit[:10]).version == first.version
    with pytest.raises(FetchError, match="carries no commit label"):
        find_build(project, world.cache, to="0.33.0")
    with pytest.raises(FetchError, match="neither a version, a commit id nor 'latest'"):
        find_build(project, world.cache, to="not a version")
    with pytest.raises(FetchError, match=r"commit 0123456 is not in .*repository"):
        find_build(project, world.cache, to="0.33.1rc1.dev9+g0123456")


def test_a_missing_variant_walks_back_to_a_complete_build(world: World) -> None:
    third = cs.commit(world.repo, {"vllm/extra.py": "X = 3\n"}, "[CI] cuda only (#40003)")
    world.channel.publish(third, 3, variants=("",))
    project = world.project()
    build = find_build(project, world.cache)
    assert build.commit == world.channel.builds[1].commit and build.probed == 2
    floor = world.channel.builds[1].commit  # never below the pinned commit
    with pytest.raises(FetchError, match="none of the 1 newest commits"):
        find_build(project, world.cache, floor=floor)
    with pytest.raises(FetchError, match=r"has no wheel for variant\(s\) cpu"):
        find_build(project, world.cache, to=third[:12])


def test_hostile_pages_are_refused(world: World) -> None:
    root = world.server.url + "chan/"
    www = world.tmp / "www" / "chan"
    name = world.channel.builds[1].wheels[""].name
    page = www / "p" / "vllm" / "index.html"
    page.parent.mkdir(parents=True)

    def listing(html: str) -> list[channel_index.Listed] | None:
        page.write_text(html)
        return read_page(root + "p/vllm/", root, "vllm", what="test channel")

    ok = listing(f'<a href="../x/{name}">w</a><a href="../x/other-1.0-py3-none-any.whl">o</a>')
    assert ok is not None and [item.filename for item in ok] == [name]
    assert ok[0].url == root + f"p/x/{name}"
    ignored = listing(
        '<a href="metadata.json">m</a><a href="vllm-bad.whl">b</a><a href="cpu/">c</a>'
    )
    assert ignored == []
    with pytest.raises(FetchError, match="outside the channel"):
        listing(f'<a href="http://evil.example/{name}">w</a>')
    with pytest.raises(FetchError, match="outside the channel"):
        listing(f'<a href="../../../{name}">w</a>')  # leaves /chan/
    with pytest.raises(FetchError, match="malformed sha256"):
        listing(f'<a href="{name}#sha256=zz">w</a>')
    assert read_page(root + "nowhere/", root, "vllm", what="t") is None  # 403/404: no tree

    js = www / "j" / "vllm" / "index.json"
    js.parent.mkdir(parents=True)

    def json_listing(files: object) -> list[channel_index.Listed] | None:
        js.write_text(json.dumps({"meta": {"api-version": "1.1"}, "files": files}))
        return read_page(root + "j/vllm/", root, "vllm", what="test channel")

    good = {"filename": name, "url": name, "hashes": {"sha256": "a" * 64}, "size": 10}
    [item] = json_listing([good]) or []
    assert item.sha256 == "a" * 64 and item.size == 10
    for bad, message in [
        ({**good, "size": -1}, "implausible size"),
        ({**good, "size": True}, "implausible size"),
        ({**good, "size": 2**40}, "implausible size"),
        ({**good, "hashes": {"sha256": "A" * 3}}, "malformed sha256"),
        ({**good, "url": "../../x.whl"}, "links to a file named"),
        ({"url": name}, "without filename or url"),
    ]:
        with pytest.raises(FetchError, match=message):
            json_listing([bad])
    with pytest.raises(FetchError, match="not a PEP 691 project page"):
        json_listing("nope")


def test_oversized_pages_and_foreign_redirects_are_refused(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = world.server.url
    monkeypatch.setattr(channel_index, "MAX_PAGE", 100)
    with pytest.raises(FetchError, match="larger than 100 bytes"):
        read_page(root + "nightly/vllm/", root, "vllm", what="t")
    monkeypatch.undo()
    other = cs.ChannelServer(world.tmp / "www")
    with other.running():
        world.server.redirects["/elsewhere/vllm/"] = other.url + "nightly/vllm/"
        with pytest.raises(FetchError, match=r"outside") as raised:
            read_page(root + "elsewhere/vllm/", root, "vllm", what="t")
        # issue 24: refused before the redirected request is made, not after it was answered
        assert other.requests == []
        assert "redirects to" in str(raised.value) and "outside the channel" in str(raised.value)


def test_a_deeply_nested_json_page_is_a_fetch_error_naming_it(world: World) -> None:
    """Issue 24: ``[`` x 100000 as a PEP 691 page ended in a RecursionError traceback."""
    root = world.server.url
    page = world.tmp / "www" / "deep" / "vllm" / "index.json"
    page.parent.mkdir(parents=True)
    page.write_bytes(b"[" * 100_000)
    with pytest.raises(FetchError, match=r"deep/vllm/ nests JSON more than 32 levels deep"):
        read_page(root + "deep/vllm/", root, "vllm", what="t")
    # the package index's pages (PEP 691 JSON and HTML) are read the same way, by name
    index = world.tmp / "index"
    (index / "tinyproj").mkdir(parents=True)
    (index / "tinyproj" / "index.json").write_bytes(b'{"files": ' + b"[" * 100_000)
    with pytest.raises(FetchError, match=r"tinyproj/ nests JSON more than 32 levels deep"):
        simple_api.project_files("tinyproj", [index.as_uri() + "/"])
    for body, message in [
        (b'{"files": "nope"}', "not a PEP 691 project page"),
        (b"[1, 2]", "not a PEP 691 project page"),
        (b'{"files": [7]}', "not an object"),
        (b'{"files": [{"filename": "a.whl", "url": "a.whl", "hashes": []}]}', "malformed"),
        (b'{"files": [{"filename": "a.whl", "url": "a.whl", "size": "9"}]}', "malformed"),
        (b'{"files": [{"url": "a.whl"}]}', "without a filename or url"),
        (b"\xff\xfe{", "not valid JSON"),
    ]:
        (index / "tinyproj" / "index.json").write_bytes(body)
        with pytest.raises(FetchError, match=message) as raised:
            simple_api.project_files("tinyproj", [index.as_uri() + "/"])
        assert "tinyproj/" in str(raised.value)


def test_wheel_downloads_follow_no_redirect_off_the_channel(world: World, tmp_path: Path) -> None:
    """Issue 24: a channel wheel's redirect to another host, or to ftp://, was followed; now it
    is refused before the redirected request is made (pages and wheels, one rule)."""
    root = world.server.url
    build = world.channel.builds[1]
    wheel = build.wheels[""]
    path = f"/{build.commit}/{wheel.name}"
    other = cs.ChannelServer(world.tmp / "www")
    with other.running():
        world.server.redirects[path] = "ftp://127.0.0.1/" + wheel.name
        with pytest.raises(
            FetchError, match=r"only redirects to http\(s\) are followed \(not to ftp:\)"
        ):
            fetch_url(build.url(root), None, Cache(tmp_path / "c"), what="w")  # any download
        stays_in = channel_index.stays_in  # the rule of the channel's pages, for its wheels
        world.server.redirects[path] = other.url + path.lstrip("/")
        with pytest.raises(FetchError, match="outside the channel") as raised:
            fetch_url(
                build.url(root), None, Cache(tmp_path / "c"), what="w", redirects=stays_in(root)
            )
        assert other.requests == []  # never asked
        assert f"redirects to {other.url}{path.lstrip('/')}" in str(raised.value)
        # within the channel, a redirect is followed as before
        del world.server.redirects[path]
        world.server.redirects[f"/moved/{wheel.name}"] = build.url(root)
        fetched = fetch_url(
            f"{root}moved/{quote(wheel.name)}",
            None,
            Cache(tmp_path / "c"),
            what="w",
            redirects=stays_in(root),
        )
        assert support.sha256(fetched) == support.sha256(wheel)


def test_an_ambiguous_short_commit_is_refused(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path / "r", bare=True)
    stream = []
    for n in range(600):  # enough commits for two to share a 4-hex prefix
        stream.append(f"commit refs/heads/main\nmark :{n + 1}\ncommitter t <t@t> {n} +0000\n")
        stream.append(f"data {len(str(n))}\n{n}\n" + (f"from :{n}\n" if n else ""))
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=repo.git_dir,
        input="".join(stream).encode(),
        check=True,
        env=support.git_env(),
    )
    commits = repo.git.rev_list("main").split()
    seen: dict[str, str] = {}
    prefix = next(c[:4] for c in commits if seen.setdefault(c[:4], c) != c)
    with pytest.raises(FetchError, match=rf"{prefix} names 2 commits .*refusing to guess"):
        gitsrc.expand_commit(repo, prefix, what="test")
    assert gitsrc.expand_commit(repo, commits[0], what="test") == commits[0]
    assert gitsrc.expand_commit(repo, "ffff" * 10, what="test") is None
    with pytest.raises(FetchError, match="not a commit id"):
        gitsrc.expand_commit(repo, "--all", what="test")


def test_a_pep_691_index_of_every_build(world: World) -> None:
    """layout = "simple": one index lists every build (PEP 691 JSON here, with hashes)."""
    www = world.tmp / "www" / "simple"
    (www / "files").mkdir(parents=True)
    files = []
    for build in world.channel.builds:
        for path in build.wheels.values():
            (www / "files" / path.name).write_bytes(path.read_bytes())
            files.append(
                {
                    "filename": path.name,
                    "url": f"/simple/files/{quote(path.name)}",
                    "hashes": {"sha256": support.sha256(path)},
                    "size": path.stat().st_size,
                }
            )
    for sub in ("vllm", "cpu/vllm"):
        (www / sub).mkdir(parents=True)
        (www / sub / "index.json").write_text(json.dumps({"files": files}))
    project = world.project('layout = "simple"', index=world.server.url + "simple/")
    build = find_build(project, world.cache)
    newest = world.channel.builds[1]
    assert (build.version, build.commit) == (newest.version, newest.commit)
    cpu = build.wheels["cpu"]
    assert cpu.sha256 == support.sha256(newest.wheels["cpu"]) and cpu.size
    assert cpu.url == world.server.url + f"simple/files/{quote(newest.wheels['cpu'].name)}"
    assert fetch_url(cpu.url, cpu.sha256, world.cache, what="cpu").name == cpu.sha256
    older = find_build(project, world.cache, to=world.channel.builds[0].version)
    assert older.commit == world.channel.builds[0].commit
    with pytest.raises(HashMismatchError, match="was expected"):
        fetch_url(build.wheels["cuda"].url, "0" * 64, world.cache, what="cuda")


def test_channel_configuration_is_checked(world: World) -> None:
    with pytest.raises(ConfigError, match="layout must be"):
        world.project('layout = "ftp"')
    with pytest.raises(ConfigError, match=r"latest '\.\./x' must be one path segment"):
        world.project('latest = "../x"')
    with pytest.raises(ConfigError, match="has no variant 'rocm'"):
        world.project(variants='rocm = { path = "rocm" }')
    with pytest.raises(ConfigError, match="must be a relative path of plain names"):
        world.project(variants='cuda = { path = "../up" }')
    with pytest.raises(ConfigError, match="local-label suffix"):
        world.project(variants='cuda = { local = "+cu" }')
    with pytest.raises(ConfigError, match="must be an http"):
        world.project(index="ftp://example.com/")
