"""manifest.json says the target's generation: written by the build, read back, checked."""

from __future__ import annotations

import pytest

from patchwheel.manifest import Manifest, ManifestError


def test_the_generation_round_trips_and_defaults_to_the_generator() -> None:
    served = Manifest(target="t", wheels=(), generation="served")
    data = served.to_json()
    assert data["generation"] == "served"
    assert Manifest.from_json(data).generation == "served"
    del data["generation"]  # a manifest written before the field: the generator generation
    assert Manifest.from_json(data).generation == "generator"


@pytest.mark.parametrize("value", ["server", 1, None, "../served"])
def test_a_hostile_generation_is_refused(value: object) -> None:
    data = Manifest(target="t", wheels=()).to_json()
    data["generation"] = value
    with pytest.raises(ManifestError, match="generation"):
        Manifest.from_json(data)
