"""README's GPU figures, written from a committed verify-gpu.json (never by hand).

``python -m patchwheel.verify.gpu.readme reports/gpu/<run>.json [more.json …] README.md``
rewrites the block between README's ``<!-- verify-gpu -->`` and ``<!-- /verify-gpu -->``
markers with each report's summary (the same text as the ``.md`` the session writes beside
the report), its headings one level down and the report's path named.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from patchwheel.errors import VerifyError
from patchwheel.verify import readme_block
from patchwheel.verify.gpu.report import check_schema, markdown_summary

START = "<!-- verify-gpu -->"
END = "<!-- /verify-gpu -->"


def block(report: Path, shown_as: str) -> str:
    """The README block for one report: its summary, headings demoted, title dropped."""
    data = json.loads(report.read_text(encoding="utf-8"))
    check_schema(data)
    lines = markdown_summary(data).splitlines()
    body = [("#" + line if line.startswith("## ") else line) for line in lines[1:]]
    title = f"From `{shown_as}` (status **{data['status']}**):"
    return "\n".join([title, *body]).strip()


def rewrite(reports: list[Path], readme: Path) -> None:
    """Replace README's verify-gpu block with the reports' summaries, in the order given."""
    blocks = "\n\n".join(block(report, report.as_posix()) for report in reports)
    readme_block.replace(readme, START, END, blocks)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        usage = "usage: python -m patchwheel.verify.gpu.readme REPORT.json [REPORT.json …] README"
        print(usage, file=sys.stderr)
        return 2
    try:
        rewrite([Path(a) for a in args[:-1]], Path(args[-1]))
    except (OSError, ValueError, VerifyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
