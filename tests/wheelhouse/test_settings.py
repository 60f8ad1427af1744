"""wheelhouse.toml's [drop] and [environment]: parsed and checked, carried into the lock and
INSTALL.txt (step 5), and read back by the GPU session as the only variables it may set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchwheel.errors import ConfigError
from patchwheel.verify.gpu import environment
from patchwheel.wheelhouse.plan import read_config
from patchwheel.wheelhouse.settings import Dropped, Variable, parse_drop, parse_environment
from patchwheel.wheelhouse.write import install_text

REPO = Path(__file__).resolve().parents[2]


def lock_with(variables: list[dict[str, str]]) -> dict[str, Any]:
    """A wheelhouse lock as write.make_lock shapes it (what install_text reads)."""
    return {
        "target": "vllm-0.26",
        "wheels": [
            {
                "name": "speculators",
                "filename": "speculators-0.3.0+pw1-py3-none-any.whl",
                "why": {"requested": "built wheel of speculators"},
            }
        ],
        "total-size": 1000,
        "destination": {"python-version": "3.12", "platform": "x86_64-manylinux_2_28"},
        "exclude-newer": "2026-07-25T10:40:49Z",
        "exclude-newer-from": "upload time",
        "resolver": "uv 0.9",
        "installed": {"file": None, "relied-on": [], "accepted-mismatches": [], "replaced": []},
        "install": {
            "check": "python3 join.py",
            "environment": "python3 -m pip install …",
            "beside": [
                "SITE=$HOME/vllm-0.26-site",
                'python3 -m pip install … --target "$SITE"',
                'export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"',
            ],
        },
        "environment-variables": variables,
        "split": None,
    }


def test_drop_entries_name_their_modules() -> None:
    table = {
        "deepspeed": "never imported",
        "nvidia-cutlass-dsl": {
            "why": "lazy",
            "imports": ["cutlass"],
            "tolerated-by": ["flashinfer"],
        },
        "Zope.Interface": {"why": "x"},
    }
    parsed = parse_drop(table, Path("w.toml"))
    assert parsed["deepspeed"] == Dropped("deepspeed", "never imported", ("deepspeed",))
    assert parsed["nvidia-cutlass-dsl"].imports == ("cutlass",)
    assert parsed["nvidia-cutlass-dsl"].tolerated_by == ("flashinfer",)
    assert parsed["zope-interface"].imports == ("zope_interface",)
    assert parsed["nvidia-cutlass-dsl"].as_json() == {
        "imports": ["cutlass"],
        "tolerated-by": ["flashinfer"],
    }


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"x": 3}, "drop.x is a string"),
        ({"x": {"imports": ["x"]}}, "drop.x is a string"),
        ({"x": {"why": "w", "import": ["x"]}}, "unknown key"),
        ({"x": {"why": "w", "imports": ["not a module"]}}, "drop.x.imports"),
        ({"x": {"why": "w", "tolerated-by": "flashinfer"}}, "drop.x.tolerated-by"),
        (["x"], "`drop` is a table"),
    ],
)
def test_bad_drop_entries_are_refused(table: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_drop(table, Path("w.toml"))


def test_environment_entries_are_checked() -> None:
    ok = parse_environment({"HF_HUB_OFFLINE": {"value": "1", "why": "no network"}}, Path("w"))
    assert ok == (Variable("HF_HUB_OFFLINE", "1", "no network"),)
    for bad, message in (
        ({"lower": {"value": "1", "why": "w"}}, "not an environment variable name"),
        ({"X": {"value": "1"}}, "is a table"),
        ({"X": {"value": 1, "why": "w"}}, "is a table"),
        ({"X": {"value": "a\nb", "why": "w"}}, "line break"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_environment(bad, Path("w"))


def test_the_committed_vllm_0_26_config_reads() -> None:
    config = read_config(REPO / "patches" / "vllm-0.26" / "wheelhouse.toml")
    drop = config["drop"]
    assert "flashinfer-python" not in drop  # vLLM 0.26 imports it on every engine start
    assert drop["nvidia-cutlass-dsl"].tolerated_by == ("flashinfer",)
    assert config["environment"] == ()


def test_install_txt_gives_the_variables_and_the_session_reads_them_back(tmp_path: Path) -> None:
    lock = lock_with(
        [{"name": "HF_HUB_OFFLINE", "value": "1", "why": "the machine has no network"}]
    )
    text = install_text(lock)
    assert "5. Environment: set these wherever the wheels run:" in text
    assert "    export HF_HUB_OFFLINE=1" in text
    (tmp_path / "INSTALL.txt").write_text(text)
    user = environment.from_install_txt(tmp_path / "INSTALL.txt")
    assert user.variables == {"HF_HUB_OFFLINE": "1"}
    assert user.pythonpath_site  # step 3b

    none = install_text(lock_with([]))
    assert "5. Environment: nothing to set" in none
    (tmp_path / "INSTALL.txt").write_text(none)
    assert environment.from_install_txt(tmp_path / "INSTALL.txt").variables == {}
