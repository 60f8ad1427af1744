"""Builders: source (PEP 517) and overlay (upstream wheel + patched files)."""
