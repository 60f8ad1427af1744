"""Upstream sources: the cache, the package index client, downloads, git mirrors, locked pins
turned into files, and the resolution of pins.
"""
