"""Rewrite the machine paths in the reports committed before they were recorded relatively.

    python reports/relativize.py [--check]

Those runs wrote where one machine kept its files (a checkout at /work/main, a wheelhouse at
/tmp/wh, a GPU session's work folder at /tmp/pw-gpu, …). Each prefix below is replaced by the
path relative to the checkout (a checkout's own files) or by the name of the folder it was
($WHEELHOUSE, $WORK_DIR, $PATCHWHEEL_CACHE, $VLLM_REPO, …), as plain text, so that every
figure stays byte for byte as the run wrote it; the summaries beside the JSON (written from
it by the same code) get the same rewrite. ``--check`` writes nothing and exits 1 when a file
would change. Scripts (``*.sh``) name where to work next, not where a run was: left alone.
"""

# ruff: noqa: S108 (the table names the temporary folders those runs wrote, to rewrite them)

from __future__ import annotations

import argparse
from pathlib import Path

from patchwheel.results.paths import relativize, text_files

ROOT = Path(__file__).resolve().parents[1]

# (what the run wrote, what it was): the longest prefix is replaced first.
TABLE = [
    ("/work/main/", ""),  # the checkout the GPU runs were prepared in
    ("/work/wt/bisect/", ""),  # the checkout the bisects ran in
    ("/tmp/patchwheel/", ""),  # the checkout the roll ran in
    ("/root/.cache/patchwheel", "$PATCHWHEEL_CACHE"),
    ("/work/.mirror/neuralmagic+vllm/repo", "$VLLM_REPO"),  # a clone of vLLM (--repo)
    ("/work/.mirror/vllm-project+speculators/repo", "$SPECULATORS_REPO"),  # speculators'
    ("/work/bisect-bench.json", "bisect-bench.json"),
    ("/tmp/pw-wheelhouse/wh", "$WHEELHOUSE"),
    ("/tmp/wh", "$WHEELHOUSE"),
    ("/tmp/pw-gpu", "$WORK_DIR"),  # nox -s gpu -- --work-dir
    ("/tmp/pw-served", "$WORK_DIR"),  # the served session's --work-dir
    ("/tmp/patchwheel", "."),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    args = parser.parse_args()
    changed = []
    for path in text_files(ROOT, ["reports"], []):
        if path.suffix == ".sh" or path == Path(__file__).resolve():
            continue
        text = path.read_text("utf-8")
        new = relativize(text, TABLE)
        if new != text:
            changed.append(path.relative_to(ROOT).as_posix())
            if not args.check:
                path.write_text(new, "utf-8")
    for name in changed:
        print(("would rewrite " if args.check else "rewrote ") + name)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
