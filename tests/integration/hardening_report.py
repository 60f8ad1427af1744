"""Write a table of HARDENING.md from a JUnit XML run of the hardening tests.

    pytest tests/integration/test_hardening_*.py --junitxml=/tmp/hardening.xml [-m ...]
    python -m tests.integration.hardening_report [--after] /tmp/hardening.xml [more.xml …]

The table (between the ``table`` markers of HARDENING.md, or the ``after`` markers with
``--after``: the run with the fixes) lists, for each test id, the defect of issue 11 it pins
down and what the run said: the first lines of its failure, or "passed" (with its time).

Issue 24's regression tests (names, interrupted rolls, rolls backwards, pages, redirects, the
channel's repository key) have a table of their own, two runs side by side: the tests run
against main's code before the fixes (``PYTHONPATH=<main>/src``) and with them::

    python -m tests.integration.hardening_report --issue24 before.xml after.xml [MAIN_COMMIT]

Issue 31's (hostile transfers and secrets) likewise, between its own markers::

    python -m tests.integration.hardening_report --issue31 before.xml after.xml [MAIN_COMMIT]
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE / "HARDENING.md"
MARKERS = {
    "before": ("<!-- table:start -->", "<!-- table:end -->"),
    "after": ("<!-- after:start -->", "<!-- after:end -->"),
    "issue24": ("<!-- issue24:start -->", "<!-- issue24:end -->"),
    "issue31": ("<!-- issue31:start -->", "<!-- issue31:end -->"),
}

ISSUE24 = {
    "test_every_verb_refuses_a_hostile_name_and_touches_nothing": (
        "1. a target or project name is a path: `roll --target ../patches/nightly` deletes the "
        "series, `--target ../x` writes outside its folders, `a/b` tracebacks, `-x` and "
        "`a b` accepted"
    ),
    "test_a_target_directory_with_a_hostile_name_is_refused": (
        "1. a target directory's name is not checked (`targets`, `--all`)"
    ),
    "test_a_state_naming_a_vendor_tree_elsewhere_is_refused_and_nothing_removed": (
        "1. a rebase's undo removes whatever path its state names"
    ),
    "test_removal_and_restoration_stay_inside_their_root": (
        "1. restoration may remove a tree outside vendor/<target>/ (no guard)"
    ),
    "test_a_roll_killed_before_each_step_continues_and_aborts": (
        "2. a roll killed after its rebase is never finished; `--abort` leaves the new pins; "
        "the next roll says up to date"
    ),
    "test_a_roll_killed_before_every_mutation_site_continues_and_aborts": (
        "2. a roll killed at any moment (every distinct mutation site; pytest --kill-all)"
    ),
    "test_up_to_date_means_built_audited_and_verified_at_the_pins": (
        "2. 'up to date' means pinned, whatever build/ holds"
    ),
    "test_a_roll_never_moves_a_pin_backwards_unless_asked": (
        "3. a roll moves a pin backwards (latest older than the pin, `--to` an older nightly)"
    ),
    "test_a_deeply_nested_json_page_is_a_fetch_error_naming_it": (
        "4. a deeply nested JSON page is a RecursionError traceback; hostile PEP 691 types "
        "are tracebacks"
    ),
    "test_hostile_channel_answers_are_errors_naming_them": (
        "4./6. through `roll`: a nested page exits 1 with a traceback; a wheel redirected to "
        "another host is downloaded from it"
    ),
    "test_a_channel_repository_in_target_toml": (
        "5. bisect reads `repo`/`git`, target.toml only `repository`"
    ),
    "test_oversized_pages_and_foreign_redirects_are_refused": (
        "6. a page redirected to another host is refused only after the request was made"
    ),
    "test_wheel_downloads_follow_no_redirect_off_the_channel": (
        "6. a wheel's redirect to another host or to ftp:// is followed"
    ),
    # the merge with issues 20/21/23: their options and the release channel held to the rules
    "test_later_options_refuse_a_hostile_name_and_touch_nothing": (
        "1. the options of issues 21/23 (`roll --missing`/`--project`, `rebase --missing`, "
        "`verify --against`) take any name"
    ),
    "test_a_hostile_name_in_the_audit_table_is_refused": (
        "1. `[audit]`'s provider and consumers are not held to the name rule"
    ),
    "test_a_hostile_variant_name_in_an_override_is_refused_by_the_name_rule": (
        "1. the variant of `--missing V=keep` is looked up unchecked"
    ),
    "test_a_release_roll_never_moves_the_pin_backwards_unless_asked": (
        "3. on the release channel: the newest final release older than the pin (a pre-release "
        "taken with `--pre`) moves the pin back; `--to` an older release moves it back"
    ),
    "test_release_pages_are_bounded_and_redirects_checked_first": (
        "4./6. on the release channel: a nested page is a RecursionError traceback; a page "
        "redirected to another host is refused only after the request; a release file "
        "redirected to ftp:// is tried"
    ),
}

ISSUE31 = {
    "test_join_never_reads_or_deletes_a_part_outside_its_folder": (
        "join reads and then deletes a part named `../x` or `/abs/x` (exit 0, 'every sha256 "
        "matches')"
    ),
    "test_join_never_writes_a_file_outside_its_folder": (
        "join writes a file named `x/../../escaped.whl` (empty folders shipped) or an absolute "
        "name outside its folder"
    ),
    "test_sha256sums_names_stay_inside_the_folder": (
        "SHA256SUMS names are not checked (`../x` is read and 'matches')"
    ),
    "test_join_follows_no_link_at_its_temporary_file": (
        "join follows a link at its temporary file `.NAME.joining` and overwrites a file "
        "outside (also when the join then fails)"
    ),
    "test_join_replaces_no_destination_that_is_not_its_own": (
        "join replaces an existing destination that is not the file parts.json records"
    ),
    "test_join_of_a_missing_folder_fails_naming_it": "join of a missing folder passes (exit 0)",
    "test_join_without_sha256sums_fails_and_keeps_the_parts": (
        "join without SHA256SUMS passes (exit 0)"
    ),
    "test_parts_are_removed_only_after_everything_is_verified": (
        "join deletes the parts before SHA256SUMS is checked"
    ),
    "test_split_overwrites_no_existing_part": "split overwrites an existing `NAME.001` silently",
    "test_split_makes_no_part_the_shell_fallback_cannot_join": (
        "above 999 parts INSTALL.txt's `cat NAME.[0-9][0-9][0-9]` fallback joins a truncated file"
    ),
    "test_serve_refuses_links_out_of_build": "serve follows a link in build/ that leads out",
    "test_serve_answers_every_bad_request_without_a_traceback": (
        "serve: NUL bytes and over-long paths give a traceback and no response"
    ),
    "test_serve_closes_idle_connections": "serve has no per-connection timeout",
    "test_serve_answers_200_clients_at_once": (
        "serve's listen backlog of 5: clients of a burst get no answer"
    ),
    "test_serve_answers_many_clients_while_idle_ones_wait": (
        "serve: idle connections are held forever, threads unbounded"
    ),
    "test_join_script_and_library_share_one_name_rule": (
        "no name rule for names arriving in files (join.py's stdlib copy and the library's)"
    ),
    "test_publish_never_shows_credentials_given_in_the_repository_url": (
        "publish echoes a token given as the URL's user name, part of a password with `@`"
    ),
    "test_publish_sends_credentials_only_to_the_repository_origin": (
        "publish sends the credentials to whatever host `--index-url` names (`--dry-run` too)"
    ),
    "test_publish_never_shows_credentials_given_in_the_index_url": (
        "publish echoes credentials inside `--index-url`"
    ),
    "test_publish_sends_no_credentials_over_plain_http_to_another_host": (
        "publish sends the credentials over plain http to another host"
    ),
    "test_installed_json_names_are_checked": (
        "wheelhouse: JSON `--installed` names unchecked (`/abs/dir/pwn` writes a stub there, "
        "`../x` tracebacks)"
    ),
    "test_out_never_replaces_a_folder_it_did_not_write": (
        "wheelhouse `--out` replaces a folder that merely holds a `wheelhouse.lock.json`"
    ),
    "test_a_huge_freeze_line_is_not_echoed_whole": (
        "wheelhouse echoes a huge freeze line whole on stderr"
    ),
    "test_the_lock_holds_no_index_credentials": (
        "wheelhouse copies pip's index URLs with their tokens into wheelhouse.lock.json"
    ),
    "test_the_gpu_report_records_secret_variables_by_name_only": (
        "the GPU session records `HF_TOKEN`'s value in verify-gpu.json"
    ),
}

# after the first line of a failure, only what patchwheel itself said (or the kill report)
KEEP = ("error:", "warning:", "cache entry", "tiny:", "- N=", "right after", "build ", "export ")

DEFECTS = {
    "test_hostile_sdist_lock_value_is_refused_and_touches_nothing": (
        "target.lock trusted as written (sdist pin): sha256 becomes a cache path (deletes "
        "outside the cache), filename a build/ path (writes outside build/), keys and types "
        "unchecked"
    ),
    "test_hostile_git_lock_value_is_refused_and_touches_nothing": (
        "target.lock trusted as written (git pin): commit/rev/sha256 values unchecked"
    ),
    "test_lock_command_refuses_a_hostile_lock_before_writing": (
        "`patchwheel lock` keeps a hostile entry it read and rewrites it"
    ),
    "test_patch_without_date_header_builds_reproducibly": (
        "a patch without `Date:` crashes the build (git: invalid date format)"
    ),
    "test_patch_writing_a_git_path_is_refused": (
        "a patch may write a `.git` path: nested gitdir file / gitlink, `.GIT/config`, "
        "`src/.git/` (any case, any depth)"
    ),
    "test_git_like_names_are_not_refused": "guard for the `.git` fix (not a defect)",
    "test_crlf_patch_is_refused_with_a_line_ending_hint": "CRLF patch refused without a hint",
    "test_truncated_patch_error_names_the_line": "a truncated patch's error lacks the line",
    "test_the_same_patch_twice_under_two_names_says_already_applied": (
        "the same patch listed twice under two names doesn't say 'already applied'"
    ),
    "test_a_patch_missing_a_required_dep3_field_is_an_error": (
        "a required DEP-3 field (Origin, Forwarded, Drop-When) missing only warns"
    ),
    "test_an_edit_in_the_cached_source_tree_never_reaches_a_wheel": (
        "the cached extracted source tree is trusted by its marker"
    ),
    "test_a_moved_tag_is_refused_on_every_run_until_update": (
        "a moved tag is refused on the first run, accepted on the second"
    ),
    "test_kill_at_a_named_moment_loses_and_leaks_nothing": (
        "kill -9 after the build/<target> link swap (index lists a missing wheel) / while "
        "patching the vendor tree (next build 'up to date' on a dirty tree, export)"
    ),
    "test_kill_before_every_mutation_of_a_build_loses_and_leaks_nothing": (
        "kill -9 at any moment of a build (every filesystem mutation and git command)"
    ),
    "test_kill_before_every_mutation_site_of_a_build_loses_and_leaks_nothing": (
        "kill -9 at any moment of a build (before the first mutation of every distinct site)"
    ),
    "test_passed_true_does_not_override_a_failed_status": (
        'publish --require-verified: `"passed": true` overrides `"status"`'
    ),
    "test_a_report_of_another_build_of_the_target_is_refused": (
        "publish --require-verified: a report is matched to the target by name only"
    ),
    "test_one_unverified_file_means_nothing_is_uploaded": (
        "publish --require-verified: the verified subset is uploaded before the run fails"
    ),
    "test_an_unpatched_upstream_sdist_of_a_verified_build_is_published": (
        "publish --require-verified: an sdist can never pass"
    ),
}


def outcome(case: ET.Element, lines: int) -> str:
    for tag in ("failure", "error"):
        found = case.find(tag)
        if found is not None:
            text = (found.get("message") or "").strip()
            if "more lines; full report" in text or not text:  # pytest shortened the message
                text = "\n".join(
                    line[1:] for line in (found.text or "").splitlines() if line.startswith("E ")
                )
            found_lines = [line.strip() for line in text.splitlines() if line.strip()]
            kept = [found_lines[0][:400]] if found_lines else []
            kept += [line[:400] for line in found_lines[1:] if line.startswith(KEEP)]
            kept = kept[:lines]
            label = "FAILS" if tag == "failure" else "ERROR"
            return f"{label}: " + "<br>".join(kept)
    if case.find("skipped") is not None:
        return "skipped: " + (case.find("skipped").get("message") or "")  # type: ignore[union-attr]
    return f"passed ({float(case.get('time') or 0):.1f} s)"


def rows(xml_paths: list[Path]) -> list[tuple[str, str, str]]:
    out = []
    for xml_path in xml_paths:
        for case in ET.parse(xml_path).getroot().iter("testcase"):
            name = case.get("name", "")
            function = name.split("[", 1)[0]
            module = case.get("classname", "").rsplit(".", 1)[-1]
            if not module.startswith("test_hardening_"):
                continue  # a whole-suite run: only the hardening tests belong in the table
            lines = 40 if "every_mutation" in function else 2
            text = outcome(case, lines).replace("|", "\\|")
            text = re.sub(r"/\S*?/(n\d{4}|fast-tmp|pytest-\d+)/\S*?(?=/checkout)", "<ws>", text)
            if len(text) > 4000:
                text = text[:4000] + " …"
            out.append((DEFECTS.get(function, "?"), f"`{module}::{name}`", text))
    return out


def issue24_rows(
    before: Path, after: Path, defects: dict[str, str] = ISSUE24
) -> list[tuple[str, str, str, str]]:
    """Issue 24's (or ``defects``') tests: defect, test id, the run before the fixes, the run
    with them."""

    def cases(path: Path) -> dict[str, str]:
        found = {}
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name", "")
            if name.split("[", 1)[0] in defects:
                module = case.get("classname", "").rsplit(".", 1)[-1]
                text = outcome(case, 2).replace("|", "\\|")
                text = re.sub(r"/tmp/\S*?(?=/checkout|/roll-hardening)", "<tmp>", text)
                text = re.sub(r"/tmp/pytest-of-[^/\s]+/pytest-\d+", "<tmp>", text)
                text = re.sub(r"/work/[^/\s]+/", "<checkout>/", text)
                text = re.sub(r"/tmp/[^\s')\]]*", "<tmp>", text)
                found[f"`{module}::{name}`"] = text[:1200] + (" …" if len(text) > 1200 else "")
        return found

    old, new = cases(before), cases(after)
    return [
        (defects[test.strip("`").split("::")[1].split("[")[0]], test, old.get(test, "-"), text)
        for test, text in new.items()
    ]


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("--issue24", "--issue31"):
        issue = argv[0].removeprefix("--")
        commit = argv[3] if len(argv) > 3 else None
        return write_issue24(Path(argv[1]), Path(argv[2]), commit, issue)
    which = "after" if "--after" in argv else "before"
    xml_paths = [Path(a) for a in argv if a != "--after"]
    start, end = MARKERS[which]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=HERE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    table = [
        f"Run against commit {commit} on {today} "
        f"(`python -m tests.integration.hardening_report {' '.join(argv)}`).",
        "",
        f"| defect (issue 11) | test id | {'with the fixes' if which == 'after' else 'today'} |",
        "| --- | --- | --- |",
        *(f"| {d} | {t} | {o} |" for d, t, o in rows(xml_paths)),
    ]
    doc = DOC.read_text("utf-8")
    head, _, rest = doc.partition(start)
    _, _, tail = rest.partition(end)
    DOC.write_text(head + start + "\n" + "\n".join(table) + "\n" + end + tail, "utf-8")
    return 0


def write_issue24(
    before: Path, after: Path, before_commit: str | None = None, issue: str = "issue24"
) -> int:
    """Issue 24's (or ``issue``'s) table between its markers: each test before the fixes and
    with them (``before_commit``: the commit of main whose code ran before, when not the fork
    point)."""
    start, end = MARKERS[issue]
    defects = {"issue24": ISSUE24, "issue31": ISSUE31}[issue]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=HERE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    table = [
        f"Runs of {today}: before = main's code "
        + (f"at commit {before_commit}" if before_commit else "at the fork point")
        + f" (`PYTHONPATH=<main>/src`), after = commit {commit} (`python -m "
        f"tests.integration.hardening_report --{issue} {before.name} {after.name}"
        + (f" {before_commit}" if before_commit else "")
        + "`).",
        "",
        f"| defect (issue {issue.removeprefix('issue')}) | test id | before the fixes | with the "
        "fixes |",
        "| --- | --- | --- | --- |",
        *(f"| {d} | {t} | {b} | {a} |" for d, t, b, a in issue24_rows(before, after, defects)),
    ]
    doc = DOC.read_text("utf-8")
    head, _, rest = doc.partition(start)
    _, _, tail = rest.partition(end)
    DOC.write_text(head + start + "\n" + "\n".join(table) + "\n" + end + tail, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
