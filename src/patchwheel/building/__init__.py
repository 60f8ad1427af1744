"""The build of one target: units and build keys, then vendor trees, audit hook, wheels, manifest
and outputs.
"""
