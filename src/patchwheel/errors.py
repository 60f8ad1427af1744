"""The exception hierarchy: every user-facing error names its input and says what to do."""

from __future__ import annotations


class PatchwheelError(Exception):
    """Base of every error patchwheel reports to a user (exit status 1, no traceback)."""

    exit_status = 1


class ConfigError(PatchwheelError):
    """A target, pin, series or lock file is malformed or inconsistent."""


class InvalidNameError(ConfigError):
    """A target, project or variant name that is not one plain path component (exit status 2,
    like a command-line usage error): refused before anything is read or written through it."""

    exit_status = 2


class PinError(ConfigError):
    """A pin cannot be parsed, is unsafe, or does not resolve."""


class NotOnIndexError(PinError):
    """The package index lists no file a pin asks for (upstream did not build it)."""


class LockError(ConfigError):
    """The lock disagrees with the target or with upstream (a moved tag, a changed pin)."""


class FetchError(PatchwheelError):
    """A download, an index lookup or a git fetch failed."""


class HttpStatusError(FetchError):
    """An HTTP server answered a request with an error status."""

    def __init__(self, url: str, code: int, reason: str) -> None:
        super().__init__(f"{url} answered HTTP {code}")
        self.url = url
        self.code = code
        self.reason = reason


class UnreachableError(FetchError):
    """An HTTP request got no answer: refused, timed out, or cut off while reading."""

    def __init__(self, url: str, cause: BaseException) -> None:
        super().__init__(f"{url}: {cause}")
        self.url = url
        self.cause = cause
        self.reason = getattr(cause, "reason", cause)


class RedirectRefusedError(FetchError):
    """A server redirected a request somewhere patchwheel does not follow (not made)."""

    def __init__(self, url: str, location: str, why: str) -> None:
        super().__init__(f"{url} redirects to {location}: {why}; refused")
        self.url = url
        self.location = location
        self.why = why


class HashMismatchError(FetchError):
    """Downloaded or cached bytes do not match the sha256 the lock records."""


class PatchError(PatchwheelError):
    """A patch is invalid (unparsable, empty, unsafe path) or does not apply strictly."""


class VendorError(PatchwheelError):
    """A vendor tree is in a state patchwheel will not touch (dirty, foreign)."""


class BuildError(PatchwheelError):
    """A wheel could not be built, overlaid or written."""


class AuditError(PatchwheelError):
    """The API-drift audit could not run (not: it found drift)."""


class BisectError(PatchwheelError):
    """A bisect cannot run: a revision, a range or a repository that does not hold it."""


class VerifyError(PatchwheelError):
    """Verification could not run or its results do not match the reference."""


class ResultsError(PatchwheelError):
    """A committed report that cannot be read, or results pages that differ from their JSON."""


class PublishError(PatchwheelError):
    """An upload was refused or failed."""
