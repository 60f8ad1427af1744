"""``patchwheel verify``: CPU hidden-state extraction with a target's built wheels."""

from __future__ import annotations

import argparse
import os

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.errors import VerifyError


def register(sub: _context.SubParsers) -> None:
    """Mount ``verify``."""
    parser = sub.add_parser(
        "verify",
        help="run speculators' extraction with the built wheels on CPU, check it against "
        "transformers (build the target first)",
    )
    parser.add_argument("--target", help=_context.TARGET_HELP)
    parser.add_argument(
        "--reuse-venv",
        action="store_true",
        help="keep the verify venv of an earlier run (the built wheels are reinstalled and "
        "re-hashed every time)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="extraction timeout (s)")
    parser.add_argument(
        "--installer",
        choices=("uv", "pip"),
        default="uv",
        help="which of the consumer's install commands (docs/tutorial.md) makes the venv "
        "(default uv)",
    )
    parser.add_argument(
        "--torch-index",
        action="append",
        metavar="URL",
        help="replace the target's declared extra index (PyPI's CPU torch index) by URL "
        "(repeatable); 'none' for no extra index. Default: the declared one, or none where "
        "PIP_FIND_LINKS is set (the machine's pip find-links hold torch)",
    )
    parser.add_argument(
        "--no-user-path",
        action="store_true",
        help="skip speculators' library pipeline (preprocessing to a draft forward pass)",
    )
    parser.add_argument(
        "--families",
        type=_families,
        default=None,
        metavar="LIST",
        help="model families checked against transformers and the vLLM oracle, comma-separated "
        "(default llama,qwen3,qwen3_moe; 'none' for none)",
    )
    parser.add_argument(
        "--against",
        metavar="TARGET",
        help="a served target only: compare its hidden-state files with the user path's files "
        "of TARGET's last passing CPU verification (a generator target, e.g. vllm-0.32: the "
        "same model and conversations, layer i there = vLLM layer id i + 1 here)",
    )
    parser.set_defaults(handler=run)


def _families(text: str) -> tuple[str, ...]:
    from patchwheel.verify import CPU_FAMILIES

    if text.strip() == "none":
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in CPU_FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown CPU model families {', '.join(unknown) or repr(text)}; choose from "
            f"{', '.join(CPU_FAMILIES)} or 'none' (deepseek_v3 is checked by the GPU session)"
        )
    return names


def run(args: argparse.Namespace) -> int:
    """Verify the target's built wheels on CPU (raises VerifyError on any mismatch)."""
    from patchwheel.config.targets import load_target
    from patchwheel.verify import (
        CPU_FAMILIES,
        extra_indexes_for,
        verify_as_user,  # loaded when the verb runs
    )

    workspace = _context.workspace(args)
    name = _context.target_name(args)
    indexes = args.torch_index
    if indexes is not None:
        indexes = [u for u in indexes if u != "none"]
    else:
        indexes = extra_indexes_for(os.environ)
    target = load_target(workspace.patches, name)
    if target.generation == "served" and (args.families is not None or args.no_user_path):
        raise VerifyError(
            f"target {name} is of the served generation: --families and --no-user-path are the "
            "generator generation's (a served target's verification is its user's path, with "
            "the Llama family on CPU; the GPU session checks the other families)"
        )
    against = None
    if args.against:
        from patchwheel.verify import generator_files

        other = load_target(workspace.patches, args.against)  # a known target, or refused
        if target.generation != "served" or other.generation != "generator":
            raise VerifyError(
                f"--against compares a served target's files with a generator target's "
                f"({name} is {target.generation}, {other.name} is {other.generation})"
            )
        against = generator_files(
            workspace.target_dir(other.name), workspace.work_dir(other.name, "verify-cpu")
        )
    verify_as_user(
        target,
        workspace.target_dir(name),
        workspace.work_dir(name, "verify-cpu"),
        installer=args.installer,
        extra_index_urls=indexes,
        families=CPU_FAMILIES if args.families is None else args.families,
        user_path=not args.no_user_path,
        reuse_venv=args.reuse_venv,
        timeout_s=args.timeout,
        console=console.stderr,
        against=against,
    )
    return 0
