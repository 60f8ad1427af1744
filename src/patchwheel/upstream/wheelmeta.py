"""The METADATA of a wheel on an index, without downloading the wheel.

First the PEP 658 file (``<wheel URL>.metadata``); where the index has none, HTTP range reads
of the wheel's zip directory and of the one member (a few requests, a few hundred kB at most,
where a CUDA wheel weighs hundreds of MB). A server that ignores ranges gets the whole file.
"""

from __future__ import annotations

import io
import zipfile
from urllib.parse import unquote, urlsplit

from patchwheel.errors import FetchError, HttpStatusError, UnreachableError
from patchwheel.http import open_url
from patchwheel.upstream import pages

TAIL = 256 * 1024


class RangeUnsupportedError(Exception):
    """The server answered a range request with the whole file."""


def remote_metadata(url: str, size: int | None, *, what: str) -> bytes:
    """The ``*.dist-info/METADATA`` of the wheel at ``url`` (``size`` bytes, if known)."""
    if urlsplit(url).scheme == "file":
        return _member(zipfile.ZipFile(unquote(urlsplit(url).path)), what)
    try:
        return _get(url + ".metadata", None, limit=pages.MAX_PAGE, what=what)
    except HttpStatusError as exc:
        if exc.code != 404:
            raise FetchError(f"{what}: {exc}") from exc
    except UnreachableError as exc:
        raise FetchError(f"{what}: {exc}") from exc
    try:
        remote = _RangeFile(url, size or _length(url))
        return _member(zipfile.ZipFile(remote), what)
    except RangeUnsupportedError:
        return _member(zipfile.ZipFile(io.BytesIO(_get(url, None))), what)
    except (HttpStatusError, UnreachableError, OSError, zipfile.BadZipFile) as exc:
        detail = exc.__cause__ if isinstance(exc, FetchError) else exc
        raise FetchError(f"{what}: could not read the metadata of {url}: {detail}") from exc


def _member(zf: zipfile.ZipFile, what: str) -> bytes:
    with zf:
        names = [
            n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            raise FetchError(f"{what}: the wheel has {len(names)} *.dist-info/METADATA files")
        return zf.read(names[0])


def _get(
    url: str, byte_range: tuple[int, int] | None, *, limit: int | None = None, what: str = ""
) -> bytes:
    headers = {}
    if byte_range is not None:
        headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
    with open_url(url, headers=headers) as response:
        if byte_range is not None and response.status != 206:
            raise RangeUnsupportedError(url)
        if limit is not None:  # a metadata file: a page, bounded like one
            return pages.read_body(response, url, what, limit)
        data: bytes = response.read()
        return data


def _length(url: str) -> int:
    with open_url(url, method="HEAD") as response:
        return int(response.headers["Content-Length"])


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file; the tail is fetched once, the rest on demand."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url = url
        self.size = size
        self.pos = 0
        start = max(0, size - TAIL)
        self.blocks: list[tuple[int, bytes]] = [(start, _get(url, (start, size - 1)))]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = min(len(buffer), self.size - self.pos)
        if count <= 0:
            return 0
        data = self._read(self.pos, count)
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def _read(self, start: int, count: int) -> bytes:
        for block_start, block in self.blocks:
            if block_start <= start and start + count <= block_start + len(block):
                return block[start - block_start : start - block_start + count]
        want = max(count, 64 * 1024)
        end = min(self.size, start + want) - 1
        data = _get(self.url, (start, end))
        self.blocks.append((start, data))
        return data[:count]
