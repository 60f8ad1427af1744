"""The served generation's GPU stages (``session.py``, dispatched to by the GPU session
:mod:`patchwheel.verify.gpu.session` when the build's manifest says ``"generation": "served"``)
and its throughput beside the generator generation's (``compare.py``).
"""

__all__: list[str] = []
