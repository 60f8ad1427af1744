"""The GPU session's child environments: what INSTALL.txt gives users, the import trace, and
declared measurement hygiene; nothing else (issue 22: VLLM_USE_FLASHINFER_SAMPLER=0, set by
the harness alone, hid that the wheelhouse could not start vLLM)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.gpu import environment, install
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.wheelhouse.write import install_text
from tests.wheelhouse.test_settings import lock_with

VERIFY = Path(environment.__file__).resolve().parents[1]
# Variables the instrument scripts set inside their own processes (not the user's path), and
# why: a new one fails test_in_process_settings_are_declared until it is listed here.
INSTRUMENT_SETTINGS = {
    ("oracle.py", "PYTHONPATH"): "the oracle's folder last on its workers' path (shadows "
    "nothing): they import its capture extension",
    ("oracle.py", "VLLM_ENABLE_V1_MULTIPROCESSING"): "the vLLM oracle (a plain vllm.LLM) "
    "steps its engine in-process",
    ("speed.py", "PYTHONPATH"): "the timing script's folder last on the workers' path: they "
    "answer its facts call",
    ("speed.py", "VLLM_ALLOW_INSECURE_SERIALIZATION"): "the vLLM prefill side only: its "
    "collective_rpc reads the engine's facts",
    ("extract_gpu.py", "PYTHONPATH"): "extract.py's folder last on the workers' path",
    ("train_draft.py", "TORCH_COMPILE_DISABLE"): "only with --no-compile, which the session "
    "does not pass",
}


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    (house / "INSTALL.txt").write_text(install_text(lock_with([])))
    return house


def options_for(tmp_path: Path, house: Path | None, system_torch: bool = True) -> GpuOptions:
    return GpuOptions(
        manifest_dir=tmp_path,
        work_dir=tmp_path / "work",
        report_path=tmp_path / "verify-gpu.json",
        wheelhouse=house,
        use_system_torch=system_torch,
    )


def set_by_session(env: dict[str, str]) -> set[str]:
    return {k for k, v in env.items() if os.environ.get(k) != v}


def test_the_session_sets_nothing_install_txt_does_not_give(tmp_path: Path, wheelhouse) -> None:
    runtime = install._runtime(options_for(tmp_path, wheelhouse), "python3", tmp_path / "site")
    user = environment.from_install_txt(wheelhouse / "INSTALL.txt")
    allowed_user = set(user.variables) | {"PYTHONPATH", environment.TRACE_VARIABLE}
    # The user's job: INSTALL.txt's variables and the trace, nothing else.
    assert set_by_session(runtime.user_env()) <= allowed_user
    # The harness's runs: plus declared hygiene only; never the old FlashInfer switch.
    harness = set_by_session(runtime.env)
    assert harness <= allowed_user | set(environment.HYGIENE)
    assert "VLLM_USE_FLASHINFER_SAMPLER" not in harness
    assert "TOKENIZERS_PARALLELISM" not in harness
    entries = runtime.user_env()["PYTHONPATH"].split(os.pathsep)
    assert entries[:2] == [str(tmp_path / "site"), str(environment.TRACE_DIR)]
    timed = runtime.env_with({"VLLM_CACHE_ROOT": str(tmp_path / "c")})
    assert timed["VLLM_CACHE_ROOT"] == str(tmp_path / "c")


def test_a_variable_install_txt_does_not_give_is_refused(tmp_path: Path, wheelhouse) -> None:
    runtime = install._runtime(options_for(tmp_path, wheelhouse), "python3", tmp_path / "site")
    with pytest.raises(VerifyError, match="VLLM_USE_FLASHINFER_SAMPLER=0"):
        runtime.env_with({"VLLM_USE_FLASHINFER_SAMPLER": "0"})
    assert runtime.allowed is not None
    strict = environment.Allowed(runtime.allowed.user, tmp_path / "site", hygiene=False)
    with pytest.raises(VerifyError, match="HF_HUB_OFFLINE=1"):
        environment.child_env(dict(os.environ), strict, hygiene={"HF_HUB_OFFLINE": "1"})
    # a path nobody told the user about, or a variable removed, is refused as well
    base = {"PATH": "/usr/bin"}
    bad = {"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere"}
    assert environment.violations(bad, base, strict) == [
        f"PYTHONPATH=/elsewhere (allowed in front: {strict.paths()})"
    ]
    assert environment.violations({}, base, strict) == ["PATH unset"]


def test_install_txt_variables_are_set_with_their_values(tmp_path: Path) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    lock = lock_with([{"name": "VLLM_SOMETHING", "value": "a b", "why": "w"}])
    (house / "INSTALL.txt").write_text(install_text(lock))
    runtime = install._runtime(options_for(tmp_path, house), "python3", tmp_path / "site")
    assert runtime.user_env()["VLLM_SOMETHING"] == "a b"
    assert runtime.allowed is not None
    changed = {**runtime.user_env(), "VLLM_SOMETHING": "c"}
    assert environment.violations(changed, runtime.base, runtime.allowed)[0].startswith(
        "VLLM_SOMETHING=c (INSTALL.txt says a b)"
    )


def test_installing_beside_needs_install_txt_to_say_so(tmp_path: Path) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    (house / "INSTALL.txt").write_text("1. pip install …\n")
    with pytest.raises(VerifyError, match=r"no `export PYTHONPATH=…` step"):
        install._runtime(options_for(tmp_path, house), "python3", tmp_path / "site")
    with pytest.raises(VerifyError, match=r"cannot read the wheelhouse's INSTALL\.txt"):
        install._runtime(options_for(tmp_path, tmp_path / "nowhere"), "python3", tmp_path)
    # no wheelhouse (README's index install): no variable at all, the venv needs no path
    runtime = install._runtime(options_for(tmp_path, None, False), "python3", tmp_path / "s")
    assert set_by_session(runtime.user_env()) <= {"PYTHONPATH", environment.TRACE_VARIABLE}


def test_in_process_settings_are_declared() -> None:
    """Every os.environ write in verify/ (the scripts run in the wheels' python) is listed,
    with why, in INSTRUMENT_SETTINGS: none may reach the user's job unnoticed."""
    found = set()
    for path in VERIFY.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Assign):
                target = next((t for t in node.targets if isinstance(t, ast.Subscript)), None)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("setdefault", "update", "pop", "__setitem__")
            ):
                target = node.func
            base = target.value if isinstance(target, ast.Subscript | ast.Attribute) else None
            if not (isinstance(base, ast.Attribute) and base.attr == "environ"):
                continue
            key = None
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                key = target.slice.value
            elif (
                isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            ):
                key = node.args[0].value
            elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Name):
                key = target.slice.id
            found.add((path.name, str(key)))
    resolved = {
        (name, "PATCHWHEEL_LAUNCHED_AT" if key == "LAUNCH_ENV" else key) for name, key in found
    }
    assert resolved == set(INSTRUMENT_SETTINGS), resolved ^ set(INSTRUMENT_SETTINGS)


def test_the_sessions_own_sources_stay_off_the_childrens_path(tmp_path: Path, wheelhouse) -> None:
    """`PYTHONPATH=src python3 -m patchwheel.verify.gpu`: the children (the user's job above
    all) do not get patchwheel's sources; other entries of the caller's path stay, last."""
    base = {"PATH": "/usr/bin", "PYTHONPATH": os.pathsep.join([str(environment.SESSION_SRC), "/x"])}
    user = environment.from_install_txt(wheelhouse / "INSTALL.txt")
    allowed = environment.Allowed(user, tmp_path / "site", hygiene=False)
    env = environment.child_env(base, allowed, trace_dir=tmp_path / "t")
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "site"),
        str(environment.TRACE_DIR),
        "/x",
    ]
    assert environment.violations(env, base, allowed) == []
