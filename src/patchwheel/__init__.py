"""patchwheel: pinned upstream sources, strict patch series, reproducible wheels."""

__version__ = "0.1.0"
