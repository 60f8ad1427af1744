"""Patch file names and series files as export writes them."""

from __future__ import annotations

from patchwheel.patching.export import patch_file_name, series_text


def test_patch_file_names_follow_git() -> None:
    assert (
        patch_file_name(1, "data_generation: stop passing kv_cache_specs to get_kv_cache_config")
        == "0001-data_generation-stop-passing-kv_cache_specs-to-get_k.patch"
    )
    assert patch_file_name(12, "fix ... the thing!") == "0012-fix-.-the-thing.patch"
    old = "# head\n\na.patch  # why a\n# about b\nb.patch\nc.patch\n# tail\n"
    assert series_text(old, ["a.patch", "c.patch", "d.patch"]) == (
        "# head\n\na.patch  # why a\nc.patch\nd.patch\n# tail\n"
    )
