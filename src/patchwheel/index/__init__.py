"""build/: the static PEP 503/691 index, the outputs (links swapped atomically) and the HTTP
server.
"""
