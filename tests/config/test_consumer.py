"""``[consumer.<variant>]`` in target.toml: declared installs, defaults, hostile input refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from patchwheel.config.consumer import ConsumerSpec
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError

PROJECTS = """\
description = "consumer test"

[projects.spec]
build = "source"
pin = "spec==1.0"

[projects.eng]
build = "overlay"
pin = "eng==2.0"

[projects.eng.variants.cuda]
pin = "eng==2.0"

[projects.eng.variants.cpu]
pin = "eng-cpu==2.0"
"""


def write(tmp_path: Path, consumer: str, projects: str = PROJECTS) -> Path:
    root = tmp_path / "patches"
    (root / "t").mkdir(parents=True)
    consumer = textwrap.dedent(consumer)
    # A top-level key must come before the first table.
    text = projects + "\n" + consumer if consumer.startswith("[") else consumer + projects
    (root / "t" / "target.toml").write_text(text)
    return root


def test_declared_and_default_flavours(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        """\
        [consumer.cpu]
        install = ["spec[run-cpu]"]
        exclude = ["vision", "audio"]
        extra-index-urls = ["https://example.org/whl/cpu"]
        """,
    )
    target = load_target(root, "t")
    assert list(target.consumers) == ["cuda", "cpu"]
    assert target.consumers["cpu"] == ConsumerSpec(
        "cpu",
        ("spec[run-cpu]",),
        ("vision", "audio"),
        ("https://example.org/whl/cpu",),
        declared=True,
    )
    # Left out: every source-built distribution plus the variant's own.
    assert target.consumers["cuda"] == ConsumerSpec("cuda", ("spec", "eng"))


def test_a_target_without_variants_has_one_default_flavour(tmp_path: Path) -> None:
    projects = 'description = "x"\n\n[projects.spec]\nbuild = "source"\npin = "spec==1.0"\n'
    target = load_target(write(tmp_path, "", projects), "t")
    assert target.consumers == {"default": ConsumerSpec("default", ("spec",))}
    declared = write(tmp_path / "b", '[consumer.default]\ninstall = ["spec[x]"]\n', projects)
    assert load_target(declared, "t").consumers["default"].install == ("spec[x]",)


@pytest.mark.parametrize(
    ("consumer", "message"),
    [
        ("[consumer.gpu]\ninstall = ['spec']\n", "[consumer.gpu] names no variant of this target"),
        ("consumer = 3\n", "[consumer] must be a table"),
        ("[consumer.cpu]\ninstall = 'spec'\n", "install: must be a list of strings"),
        ("[consumer.cpu]\ninstall = []\n", "install: must name at least one requirement"),
        ("[consumer.cpu]\ninstall = ['spec', 'spec']\n", "lists an entry twice"),
        ("[consumer.cpu]\ninstall = ['numpy']\n", "'numpy' is not a distribution this target"),
        ("[consumer.cpu]\ninstall = ['spec==1.0']\n", "give the name and extras only"),
        ("[consumer.cpu]\ninstall = ['spec @ https://x/y.whl']\n", "give the name and extras"),
        ("[consumer.cpu]\ninstall = ['spec[']\n", "'spec[' is not a requirement"),
        ("[consumer.cpu]\ninstall = ['spec']\nextras = 1\n", "unknown key(s) ['extras']"),
        ("[consumer.cpu]\ninstall = ['spec']\nexclude = ['../x']\n", "'../x' is not a project"),
        ("[consumer.cpu]\ninstall = ['spec']\nexclude = ['eng-cpu']\n", "is built by this"),
        (
            "[consumer.cpu]\ninstall = ['spec']\nextra-index-urls = ['ftp://x/simple']\n",
            "is not an http(s) index URL",
        ),
        (
            "[consumer.cpu]\ninstall = ['spec']\nextra-index-urls = ['https://u:p@x/simple']\n",
            "carries credentials",
        ),
        (
            "[consumer.cpu]\ninstall = ['spec']\nextra-index-urls = ['https://x/$(id)']\n",
            "characters a shell would interpret",
        ),
    ],
)
def test_bad_consumer_tables_are_refused(tmp_path: Path, consumer: str, message: str) -> None:
    root = write(tmp_path, consumer)
    with pytest.raises(ConfigError) as info:
        load_target(root, "t")
    assert message in str(info.value)
    assert str(root / "t" / "target.toml") in str(info.value)
