"""Pin syntax: where one revision of a project comes from, written like a PEP 508 requirement.

* ``speculators==0.3.0``                       an artifact (sdist or wheel) from the package index
* ``speculators @ git+https://host/repo@REV``  a git revision (tag, branch or 40-hex commit)
* ``vllm @ https://host/vllm-0.32.0-….whl``    an artifact at a URL
* ``vllm @ file:///abs/x.whl`` or ``vllm @ ./x.whl``  a local artifact (or source directory)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from patchwheel.errors import PinError

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*@\s*(\S.*?)\s*$")


@dataclass(frozen=True)
class Pin:
    """A parsed pin; ``text`` is exactly what the user wrote."""

    name: str
    text: str

    @property
    def project(self) -> str:
        """The canonical (PEP 503 normalized) project name."""
        return canonicalize_name(self.name)


@dataclass(frozen=True)
class IndexPin(Pin):
    """``name==version``: an artifact found through the package index's Simple API."""

    version: str


@dataclass(frozen=True)
class GitPin(Pin):
    """``name @ git+URL@REV``: a git revision; ``rev`` may be a tag, a branch or a commit."""

    url: str
    rev: str

    @property
    def is_commit(self) -> bool:
        """Whether the rev is already a full commit id (nothing to resolve)."""
        return bool(COMMIT_RE.match(self.rev))


@dataclass(frozen=True)
class UrlPin(Pin):
    """``name @ https://…``: an artifact (sdist or wheel) downloaded from a URL."""

    url: str

    @property
    def filename(self) -> str:
        """The artifact's file name, taken from the URL path."""
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])


@dataclass(frozen=True)
class PathPin(Pin):
    """``name @ ./x.whl`` or ``name @ file:///x``: a local artifact or source directory."""

    path: Path

    @property
    def filename(self) -> str:
        """The artifact's file name."""
        return self.path.name


def parse_pin(text: str, *, base_dir: Path | None = None) -> Pin:
    """Parse one pin; ``base_dir`` anchors relative paths (the target's directory)."""
    text = text.strip()
    if not text:
        raise PinError("empty pin: write it like `name==1.2.3` or `name @ git+URL@REV`")
    match = _NAME_RE.match(text)
    if match:
        return _parse_direct(text, match.group(1), match.group(2), base_dir)
    return _parse_index(text)


def _parse_index(text: str) -> IndexPin:
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise PinError(f"pin {text!r} is not a requirement: {exc}") from exc
    specs = list(req.specifier)
    if req.url or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        raise PinError(
            f"pin {text!r} must name one exact version (`{req.name}==X.Y.Z`), "
            "a git revision or an artifact URL"
        )
    if req.extras or req.marker:
        raise PinError(f"pin {text!r}: extras and markers have no meaning in a pin")
    try:
        Version(specs[0].version)
    except InvalidVersion as exc:
        raise PinError(f"pin {text!r}: {specs[0].version!r} is not a PEP 440 version") from exc
    return IndexPin(name=req.name, text=text, version=specs[0].version)


def _parse_direct(text: str, name: str, location: str, base_dir: Path | None) -> Pin:
    _refuse_option_like(text, location)
    if location.startswith("git+"):
        return _parse_git(text, name, location[len("git+") :])
    scheme = urlsplit(location).scheme
    if scheme in ("http", "https"):
        return UrlPin(name=name, text=text, url=location)
    if scheme == "file":
        return PathPin(name=name, text=text, path=Path(unquote(urlsplit(location).path)))
    if scheme and len(scheme) > 1:
        raise PinError(
            f"pin {text!r}: unsupported URL scheme {scheme!r} (use git+, https or a path)"
        )
    path = Path(location).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return PathPin(name=name, text=text, path=path)


def _parse_git(text: str, name: str, url_and_rev: str) -> GitPin:
    parts = urlsplit(url_and_rev)
    if parts.scheme not in ("https", "http", "ssh", "file", "git"):
        raise PinError(f"pin {text!r}: git URL needs a scheme (git+https://, git+file:// …)")
    if "@" not in parts.path:
        raise PinError(
            f"pin {text!r} has no revision: append `@<tag, branch or 40-hex commit>` to the URL"
        )
    path, rev = parts.path.rsplit("@", 1)
    url = parts._replace(path=path, fragment="").geturl()
    _refuse_option_like(text, url)
    _refuse_option_like(text, rev)
    if not rev or any(ch.isspace() for ch in rev) or ".." in rev:
        raise PinError(f"pin {text!r}: {rev!r} is not a valid git revision")
    return GitPin(name=name, text=text, url=url, rev=rev)


def _refuse_option_like(text: str, value: str) -> None:
    """Refuse values git or a shell could read as an option (``--upload-pack=…``)."""
    if value.startswith("-"):
        raise PinError(
            f"pin {text!r}: {value!r} starts with '-', which git would read as an option; refused"
        )


def check_sha256(value: str, *, what: str) -> str:
    """Validate a hex sha256 written in a target or lock file."""
    value = value.strip().lower()
    if value.startswith("sha256:"):
        value = value[len("sha256:") :]
    if not SHA256_RE.match(value):
        raise PinError(f"{what}: {value!r} is not a sha256 (64 hex digits)")
    return value
