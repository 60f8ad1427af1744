"""The offline wheelhouse: a target's built wheels plus the dependency closure they need, for a
machine without network.
"""
