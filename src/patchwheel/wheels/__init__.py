"""The wheel format (names, RECORD, a raw-copying writer) and the two builders: source (PEP 517,
normalized) and overlay (upstream wheel + patched files).
"""
