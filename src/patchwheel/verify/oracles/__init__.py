"""What extraction is judged against, and the judging.

- ``reference.py``: the residual stream after chosen decoder layers, computed by transformers;
- ``compare.py``: what the generator (or a server's files) returned against a reference,
  tensor by tensor, with the tolerances per dtype.

The second oracle, vLLM's own forward pass of a plain LLM, runs in the wheels' python:
``verify/payloads/oracle.py``.
"""

__all__: list[str] = []
