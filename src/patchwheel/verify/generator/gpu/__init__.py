"""The generator generation's GPU stages: correctness per family against both oracles,
training, throughput and speculators' own scripts (the user's job); run by the GPU session
(:mod:`patchwheel.verify.gpu.session`).
"""

__all__: list[str] = []
