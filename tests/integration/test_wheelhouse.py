"""The offline wheelhouse: real builds, real PyPI resolutions (uv), real offline pip installs.

Dates pin every resolution (``--exclude-newer``), so the expected versions are facts of PyPI's
history. The GPU machine's package list is the real one (tests/data/h200-freeze.txt, from
``python3 -m pip list --format=freeze`` on the H200 image: torch 2.11.0, transformers 5.17.0).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree
from tests import support

LOCAL_PLATFORM = f"manylinux_2_17_{platform.machine()}"
LOCAL_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


# --- a built target with real dependencies (network: PyPI) ----------------------------------


@dataclass
class Tiny:
    """A checkout whose target ``tiny`` is tinyproj 1.1 (needs requests[socks], packaging)."""

    root: Path
    cache: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return support.patchwheel(self.root, *args, cache=self.cache)

    def wheelhouse(self, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
        proc = self.run("wheelhouse", "--json", *args)
        lock = json.loads(proc.stdout) if proc.returncode == 0 else {}
        return proc, lock


PYPROJECT_DEPS = """requires-python = ">=3.8"
dependencies = ["requests[socks]>=2", "packaging>=20"]
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, shared_cache_dir: Path) -> Tiny:
    base = tmp_path_factory.mktemp("wheelhouse")
    upstream = base / "upstream"
    support.make_upstream(upstream, version="1.1")
    pyproject = upstream / "pyproject.toml"
    text = pyproject.read_text().replace('requires-python = ">=3.8"\n', PYPROJECT_DEPS)
    support.commit_file(upstream, "pyproject.toml", text, "depend on requests and packaging")
    support.run_git(upstream, "tag", "-f", "v1.1")
    root = base / "checkout"
    target = root / "patches" / "tiny" / "target.toml"
    target.parent.mkdir(parents=True)
    target.write_text(
        textwrap.dedent(
            f"""\
            description = "tinyproj with real dependencies"
            default = true

            [projects.tinyproj]
            build = "source"
            pin = "tinyproj @ git+{upstream.as_uri()}@v1.1"
            """
        )
    )
    co = Tiny(root, shared_cache_dir)
    for command in ("lock", "build"):
        proc = co.run(command)
        assert proc.returncode == 0, proc.stderr
    return co


def versions(lock: dict) -> dict[str, str]:
    return {w["name"]: w["version"] for w in lock["wheels"]}


FOREIGN = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")


@pytest.mark.network
def test_resolution_as_of_a_date_for_a_foreign_python(tiny: Tiny) -> None:
    proc, lock = tiny.wheelhouse("--exclude-newer", "2023-01-01", *FOREIGN, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert versions(lock) == {
        "tinyproj": versions(lock)["tinyproj"],
        "packaging": "22.0",  # 23.0 came out on 2023-01-08
        "requests": "2.28.1",
        "pysocks": "1.7.1",  # requests[socks]
        "certifi": "2022.12.7",
        "charset-normalizer": "2.1.1",
        "idna": "3.4",
        "urllib3": "1.26.13",
    }
    built = next(w for w in lock["wheels"] if w["name"] == "tinyproj")
    assert built["version"].startswith("1.1+pw")
    assert built["origin"] == "build" and built["why"]["requested"] == "built wheel of tinyproj"
    requests = next(w for w in lock["wheels"] if w["name"] == "requests")
    assert requests["why"] == {"requested": None, "dependency-of": ["tinyproj"]}
    assert requests["url"].startswith("https://") and len(requests["sha256"]) == 64
    assert requests["upload-time"] < "2023-01-01"
    assert lock["exclude-newer"] == "2023-01-01T00:00:00Z"
    assert lock["destination"] == {
        "python-version": "3.12",
        "platform": "manylinux_2_28_x86_64",
        "implementation": "cp",
    }

    later, lock_2024 = tiny.wheelhouse("--exclude-newer", "2024-01-01", *FOREIGN, "--dry-run")
    assert later.returncode == 0, later.stderr
    assert versions(lock_2024)["packaging"] == "23.2"
    assert versions(lock_2024)["requests"] == "2.31.0"


@pytest.mark.network
def test_compiled_wheels_are_chosen_for_the_destination_not_this_machine(tiny: Tiny) -> None:
    proc, lock = tiny.wheelhouse(
        "--exclude-newer", "2024-01-01", *FOREIGN, "--with", "pyyaml", "--dry-run"
    )
    assert proc.returncode == 0, proc.stderr
    pyyaml = next(w for w in lock["wheels"] if w["name"] == "pyyaml")
    assert pyyaml["filename"] == (
        "PyYAML-6.0.1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    )
    assert pyyaml["why"]["requested"] == "--with"

    # PyYAML's aarch64 wheel of 6.0.1 came later (2024-01-18) than its x86_64 one
    arm, arm_lock = tiny.wheelhouse(
        "--exclude-newer",
        "2024-02-01",
        "--python-version",
        "3.12",
        "--platform",
        "manylinux_2_28_aarch64",
        "--with",
        "pyyaml",
        "--dry-run",
    )
    assert arm.returncode == 0, arm.stderr
    assert {w["filename"] for w in arm_lock["wheels"] if w["name"] == "pyyaml"} == {
        "PyYAML-6.0.1-cp312-cp312-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
    }

    # before 6.0.1 (July 2023) no PyYAML release had a wheel for CPython 3.12
    none, _ = tiny.wheelhouse("--exclude-newer", "2023-01-01", *FOREIGN, "--with", "pyyaml")
    assert none.returncode == 1
    assert "pyyaml" in none.stderr.lower()
    assert "--platform" in none.stderr


@pytest.mark.network
def test_installed_packages_are_taken_as_given(tiny: Tiny, tmp_path: Path) -> None:
    freeze = tmp_path / "gpu.txt"
    freeze.write_text("requests==2.28.1\npackaging==21.3\ntorch==2.11.0\n")
    proc, lock = tiny.wheelhouse(
        "--exclude-newer", "2023-01-01", *FOREIGN, "--installed", str(freeze), "--dry-run"
    )
    assert proc.returncode == 0, proc.stderr
    # requests is there, so are its own dependencies; only its socks extra adds PySocks
    assert sorted(versions(lock)) == ["pysocks", "tinyproj"]
    assert next(w for w in lock["wheels"] if w["name"] == "pysocks")["why"]["dependency-of"] == [
        "requests"
    ]
    relied = {r["name"]: r for r in lock["installed"]["relied-on"]}
    assert relied["requests"] == {
        "name": "requests",
        "version": "2.28.1",
        "required-by": ["tinyproj"],
    }
    assert relied["packaging"]["version"] == "21.3"
    assert "torch" not in relied  # installed but not needed
    assert lock["installed"]["file"] == str(freeze)

    bare = tmp_path / "bare.txt"
    bare.write_text("requests\npackaging\n")
    proc, lock = tiny.wheelhouse(
        "--exclude-newer", "2023-01-01", *FOREIGN, "--installed", str(bare), "--dry-run"
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(versions(lock)) == ["tinyproj"]  # versions unknown: extras not checked
    assert {r["name"]: r["version"] for r in lock["installed"]["relied-on"]} == {
        "packaging": None,
        "requests": None,
    }


@pytest.mark.network
def test_an_installed_version_that_does_not_fit_is_reported_not_dropped(
    tiny: Tiny, tmp_path: Path
) -> None:
    freeze = tmp_path / "old.txt"
    freeze.write_text("packaging==19.0\nrequests==2.28.1\n")
    args = ("--exclude-newer", "2023-01-01", *FOREIGN, "--installed", str(freeze), "--dry-run")

    proc, _ = tiny.wheelhouse(*args)
    assert proc.returncode == 1
    assert (
        "tinyproj requires packaging>=20; the destination has packaging 19.0 "
        "(would carry packaging 22.0)"
    ) in proc.stderr
    assert "--upgrade packaging" in proc.stderr
    assert "--accept-installed packaging" in proc.stderr
    assert str(freeze) in proc.stderr

    accepted, lock = tiny.wheelhouse(*args, "--accept-installed", "packaging")
    assert accepted.returncode == 0, accepted.stderr
    assert "packaging" not in versions(lock)
    assert lock["installed"]["accepted-mismatches"] == [
        {
            "name": "packaging",
            "installed": "19.0",
            "requirement": "packaging>=20",
            "required_by": "tinyproj",
            "accepted": True,
        }
    ]

    upgraded, lock = tiny.wheelhouse(*args, "--upgrade", "packaging")
    assert upgraded.returncode == 0, upgraded.stderr
    assert versions(lock)["packaging"] == "22.0"
    assert lock["installed"]["replaced"] == [{"name": "packaging", "installed": "19.0"}]

    unknown, _ = tiny.wheelhouse(*args, "--upgrade", "numpy")
    assert unknown.returncode == 1
    assert "--upgrade numpy: numpy is not in the installed list" in unknown.stderr


@pytest.mark.network
def test_a_fallback_to_an_ancient_wheel_is_refused(tiny: Tiny) -> None:
    # deepspeed publishes sdists only; its one old wheel (0.3.1.dev3, 2020) is not a choice
    args = ("--exclude-newer", "2025-12-10", *FOREIGN, "--installed", str(support.H200_FREEZE))
    proc, _ = tiny.wheelhouse(*args, "--dry-run", "--with", "deepspeed")
    assert proc.returncode == 1
    assert "deepspeed: the newest release as of 2025-12-10T00:00:00Z is 0.18.3" in proc.stderr
    assert "fell back to 0.3.1.dev3" in proc.stderr
    assert "--drop deepspeed" in proc.stderr

    on_purpose, lock = tiny.wheelhouse(*args, "--dry-run", "--with", "deepspeed==0.3.1.dev3")
    assert on_purpose.returncode == 0, on_purpose.stderr
    assert versions(lock)["deepspeed"] == "0.3.1.dev3"


@pytest.mark.network
def test_the_resolution_date_comes_from_the_pins(tiny: Tiny) -> None:
    proc, _ = tiny.wheelhouse(*FOREIGN, "--dry-run")  # a git pin has no upload time
    assert proc.returncode == 1
    assert "--exclude-newer" in proc.stderr
    bad, _ = tiny.wheelhouse("--exclude-newer", "last tuesday", "--dry-run")
    assert bad.returncode == 1
    assert "last tuesday" in bad.stderr


@pytest.mark.network
def test_the_folder_installs_offline_and_is_reproducible(tiny: Tiny, tmp_path: Path) -> None:
    out = tmp_path / "wheelhouse"
    args = (
        "--exclude-newer",
        "2023-01-01",
        "--python-version",
        LOCAL_PYTHON,
        "--platform",
        LOCAL_PLATFORM,
        "--out",
        str(out),
        "--split",
        "50kB",
    )
    proc, lock = tiny.wheelhouse(*args)
    assert proc.returncode == 0, proc.stderr
    assert lock["split"]["files"]  # e.g. certifi and requests arrive in parts
    for name in lock["split"]["files"]:
        assert not (out / name).exists()
    assert max(p.stat().st_size for p in out.iterdir()) <= 50_000
    for name in ("INSTALL.txt", "requirements.txt", "SHA256SUMS", "join.py", "parts.json"):
        assert (out / name).is_file()
    assert json.loads((out / "wheelhouse.lock.json").read_text()) == lock
    install = (out / "INSTALL.txt").read_text()
    assert lock["install"]["environment"] in install
    assert "python3 join.py" in install

    # a second run gives the same lock and swaps the folder whole
    again, lock_again = tiny.wheelhouse(*args)
    assert again.returncode == 0, again.stderr
    assert lock_again == lock
    assert [p.name for p in tmp_path.iterdir()] == ["wheelhouse"]

    # the destination: no network, only this folder
    arrived = shutil.copytree(out, tmp_path / "arrived")
    joined = subprocess.run(
        [sys.executable, "-I", "join.py"], cwd=arrived, capture_output=True, check=False
    )
    assert joined.returncode == 0, joined.stderr
    for wheel in lock["wheels"]:
        data = (arrived / wheel["filename"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == wheel["sha256"]
    python = support.fresh_venv(tmp_path / "venv")
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "", "PIP_CONSTRAINT": ""}
    command = lock["install"]["environment"].split()[1:]
    pip = subprocess.run(
        [str(python), *command],
        cwd=arrived,
        capture_output=True,
        text=True,
        env=offline,
        check=False,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    check = subprocess.run(
        [
            str(python),
            "-c",
            "import tinyproj, requests, packaging, socks; print(requests.__version__)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == "2.28.1"

    # beside the machine's own packages: --target + PYTHONPATH
    site = tmp_path / "site"
    beside = subprocess.run(
        [str(python), *command, "--target", str(site)],
        cwd=arrived,
        capture_output=True,
        text=True,
        env=offline,
        check=False,
    )
    assert beside.returncode == 0, beside.stderr
    bare = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "import tinyproj.core, packaging; print(packaging.__version__)",
            str(site),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.strip() == "22.0"


@pytest.mark.network
def test_hashes_are_verified_everywhere(tiny: Tiny, tmp_path: Path) -> None:
    args = (
        "--exclude-newer",
        "2023-01-01",
        "--python-version",
        LOCAL_PYTHON,
        "--platform",
        LOCAL_PLATFORM,
    )
    out = tmp_path / "wh"
    proc, lock = tiny.wheelhouse(*args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr

    # a cached download that rotted is noticed and fetched again
    idna = next(w for w in lock["wheels"] if w["name"] == "idna")
    blob = tiny.cache / "blobs" / "sha256" / idna["sha256"][:2] / idna["sha256"]
    blob.unlink()
    blob.write_bytes(b"rotten")
    healed, lock_healed = tiny.wheelhouse(*args, "--out", str(out))
    assert healed.returncode == 0, healed.stderr
    assert "corrupt" in healed.stderr
    assert hashlib.sha256((out / idna["filename"]).read_bytes()).hexdigest() == idna["sha256"]
    assert lock_healed == lock

    # a wheel damaged in the folder (in transfer) is named by join.py and by sha256sum
    damaged = out / idna["filename"]
    data = damaged.read_bytes()
    damaged.unlink()  # a new file: the cache's hard link stays intact
    damaged.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    check = subprocess.run(
        [sys.executable, "-I", "join.py", "--check"],
        cwd=out,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 1
    assert idna["filename"] in check.stderr

    # a built wheel changed after the build is refused
    copy = tmp_path / "copy"
    shutil.copytree(tiny.root, copy, symlinks=True)
    built = next(w for w in lock["wheels"] if w["name"] == "tinyproj")
    path = copy / "build" / "tiny" / "wheels" / built["filename"]
    content = path.read_bytes()
    path.unlink()
    path.write_bytes(content + b"\0")
    tampered = support.patchwheel(copy, "wheelhouse", *args, "--dry-run", cache=tiny.cache)
    assert tampered.returncode == 1
    assert built["filename"] in tampered.stderr
    assert built["sha256"] in tampered.stderr


@pytest.mark.network
def test_a_missing_build_says_what_to_run(tmp_path: Path, shared_cache_dir: Path) -> None:
    root = tmp_path / "co"
    (root / "patches" / "t").mkdir(parents=True)
    (root / "patches" / "t" / "target.toml").write_text(
        'default = true\n[projects.p]\nbuild = "source"\npin = "p==1.0"\n'
    )
    proc = support.patchwheel(root, "wheelhouse", "--target", "t", cache=shared_cache_dir)
    assert proc.returncode == 1
    assert "nox -s build -- --target t" in proc.stderr


# --- speculators and vLLM against the GPU machine's own packages ----------------------------


def _speculators_target(root: Path, cache: Path, *, vllm: str | None = None) -> None:
    """A target with speculators 0.3.0 (one patch, so it is built) and optionally vLLM."""
    tree = source_tree("speculators==0.3.0", Cache(cache))
    repo = root.parent / "speculators-src"
    rel = "src/speculators/__init__.py"
    (repo / rel).parent.mkdir(parents=True)
    shutil.copyfile(tree / rel, repo / rel)
    support.run_git(repo, "init", "-q", "-b", "main")
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", "speculators 0.3.0")
    base = support.run_git(repo, "rev-parse", "HEAD")
    support.edit_and_commit(
        repo, rel, lambda t: t + "\n# wheelhouse test build\n", "mark the test build"
    )
    series = root / "patches" / "gpu" / "speculators"
    support.format_patches(repo, base, series)
    text = textwrap.dedent(
        """\
        description = "speculators 0.3.0 for the GPU machine"
        default = true

        [projects.speculators]
        build = "source"
        pin = "speculators==0.3.0"
        sha256 = "8e661b838c2486e3a0deb23d67116254a1bea667d1d4813489632e1fdb67075a"
        """
    )
    if vllm:
        text += textwrap.dedent(
            f"""
            [projects.speculators.extras]
            datagen = ["vllm"]

            [projects.vllm]
            build = "overlay"
            pin = "vllm=={vllm}"

            [projects.vllm.variants.cuda]
            pin = "vllm=={vllm}"
            """
        )
        # the committed target's GPU-specific modules, for the same CUDA wheel
        committed = {"0.26.0": "vllm-0.26", "0.32.0": "vllm-0.32"}[vllm]
        text += support.gpu_tables(committed)
    (root / "patches" / "gpu" / "target.toml").write_text(text)
    for command in ("lock", "build"):
        proc = support.patchwheel(
            root, command, *(["--no-audit"] if command == "build" else []), cache=cache
        )
        assert proc.returncode == 0, proc.stderr


@pytest.mark.network
def test_speculators_for_the_gpu_image(tmp_path: Path, shared_cache_dir: Path) -> None:
    root = tmp_path / "co"
    _speculators_target(root, shared_cache_dir)
    gpu = ("--installed", str(support.H200_FREEZE), "--dry-run", "--json")

    conflict = support.patchwheel(root, "wheelhouse", *gpu, cache=shared_cache_dir)
    assert conflict.returncode == 1
    assert (
        "datasets requires fsspec<=2025.10.0,>=2023.1.0; the destination has fsspec 2026.7.0"
    ) in conflict.stderr

    proc = support.patchwheel(
        root,
        "wheelhouse",
        *gpu,
        "--accept-installed",
        "fsspec",
        "--drop",
        "deepspeed",
        cache=shared_cache_dir,
    )
    assert proc.returncode == 0, proc.stderr
    lock = json.loads(proc.stdout)
    # as of speculators 0.3.0's upload, for the image's Python 3.12
    assert lock["exclude-newer"] == "2025-12-10T18:08:59Z"
    assert "speculators-0.3.0.tar.gz" in lock["exclude-newer-from"]
    carried = versions(lock)
    assert carried["speculators"].startswith("0.3.0+pw")
    assert carried["datasets"] == "4.4.1"
    assert {"h2", "hpack", "hyperframe"} <= set(carried)  # httpx[http2]: the image lacks h2
    relied = {r["name"] for r in lock["installed"]["relied-on"]}
    assert {"torch", "transformers", "numpy", "httpx", "safetensors"} <= relied
    assert not {"torch", "transformers", "deepspeed"} & set(carried)
    assert lock["dropped"] == [
        {
            "name": "deepspeed",
            "why": "--drop",
            "required-by": ["speculators"],
            "imports": ["deepspeed"],
            "tolerated-by": [],
        }
    ]


@pytest.mark.network
@pytest.mark.slow
def test_vllm_0_26_closure_for_the_gpu_image(tmp_path: Path, shared_cache_dir: Path) -> None:
    """The issue's case: speculators 0.3.0 + vLLM 0.26.0 (CUDA) for the H200 image."""
    root = tmp_path / "co"
    _speculators_target(root, shared_cache_dir, vllm="0.26.0")
    (root / "patches" / "gpu" / "wheelhouse.toml").write_text(
        '[drop]\ndeepspeed = "speculators never imports it"\n'
    )
    gpu = ("--installed", str(support.H200_FREEZE), "--dry-run", "--json")

    conflict = support.patchwheel(root, "wheelhouse", *gpu, cache=shared_cache_dir)
    assert conflict.returncode == 1
    for line in (
        "vllm requires numba==0.65.0; the destination has numba 0.68.0",
        "vllm requires setuptools<81.0.0,>=77.0.3; the destination has setuptools 81.0.0",
    ):
        assert line in conflict.stderr
    accept = [
        f"--accept-installed={name}"
        for name in ("cuda-core", "fsspec", "numba", "numpy", "protobuf", "setuptools")
    ]
    proc = support.patchwheel(root, "wheelhouse", *gpu, *accept, cache=shared_cache_dir)
    assert proc.returncode == 0, proc.stderr
    lock = json.loads(proc.stdout)
    carried = versions(lock)
    wheels = {w["name"]: w for w in lock["wheels"]}
    assert carried["vllm"] == "0.26.0"
    assert carried["xgrammar"] == "0.2.3"
    assert wheels["xgrammar"]["why"]["requested"] == "imported eagerly by vllm"
    assert wheels["llguidance"]["why"]["requested"] == "imported eagerly by vllm"
    assert wheels["llguidance"]["filename"].endswith("manylinux_2_31_x86_64.whl")
    for needed in (
        "apache-tvm-ffi",
        "openai",
        "pydantic",
        "msgspec",
        "pyzmq",
        "cbor2",
        "openai-harmony",
        "fastapi",
        "starlette",
        "partial-json-parser",
        "sniffio",
    ):
        assert needed in carried, needed
    relied = {r["name"]: r["version"] for r in lock["installed"]["relied-on"]}
    assert relied["torch"] == "2.11.0" and relied["transformers"] == "5.17.0"
    assert not {"torch", "transformers", "triton", "numpy", "deepspeed"} & set(carried)
    assert lock["exclude-newer"] == "2026-07-25T10:40:49Z"


@pytest.mark.network
def test_the_configured_index_is_the_one_resolved_against(tiny: Tiny, tmp_path: Path) -> None:
    """PATCHWHEEL_INDEX_URL (or pip's index-url) decides where dependencies come from."""
    wheels = tmp_path / "files"
    made = [
        support.make_wheel(wheels, "inhouse-dep", version, {"inhouse_dep/__init__.py": b""})
        for version in ("1.0", "2.0")
    ]
    index = support.write_index(tmp_path / "index", made)
    env = {"PATCHWHEEL_INDEX_URL": index}
    args = ("wheelhouse", "--json", "--with", "inhouse-dep", "--out", str(tmp_path / "wh"))

    # a private index without PEP 700 upload times cannot answer "as of a date" …
    dated = support.patchwheel(
        tiny.root, *args, "--exclude-newer", "2023-01-01", "--dry-run", cache=tiny.cache, env=env
    )
    assert dated.returncode == 1
    assert "--exclude-newer none" in dated.stderr
    # … so --exclude-newer none resolves against what it has now (the lock still pins it)
    proc = support.patchwheel(
        tiny.root,
        *args,
        "--exclude-newer",
        "none",
        "--drop",
        "requests",
        "--drop",
        "packaging",
        cache=tiny.cache,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lock = json.loads(proc.stdout)
    assert versions(lock) == {"inhouse-dep": "2.0", "tinyproj": versions(lock)["tinyproj"]}
    dep = next(w for w in lock["wheels"] if w["name"] == "inhouse-dep")
    assert dep["url"] == made[1].as_uri()
    assert dep["sha256"] == support.sha256(made[1])
    assert lock["indexes"] == [index]
    assert lock["exclude-newer"] is None
    assert (tmp_path / "wh" / made[1].name).read_bytes() == made[1].read_bytes()
