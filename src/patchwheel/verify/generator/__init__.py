"""The generator generation's verification (speculators 0.3.0 drives vLLM's engine itself).

On CPU (``nox -s verify``): ``cpu.py`` (the driver; :func:`~.cpu.verify_as_user` also hands a
served target to ``verify.served.cpu``), ``plan.py`` (model, layers, prompts), ``extraction.py``
(one run of ``payloads/extract.py`` read back), ``crash.py`` (a crashed extraction explained),
``family_check.py`` (the model families against both oracles), ``userpath.py`` (speculators'
own library pipeline, ``payloads/pipeline.py``, checked stage by stage).

On a GPU (stages of the GPU session, :mod:`patchwheel.verify.gpu`): ``gpu/correctness.py``,
``gpu/training.py``, ``gpu/throughput.py``, ``gpu/userjob.py``.
"""

__all__: list[str] = []
