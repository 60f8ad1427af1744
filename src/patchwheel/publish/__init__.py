"""Uploads of a built target to a package repository (twine), checked against the repository's own
index.
"""
