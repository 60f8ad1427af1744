"""The served generation's verification (speculators >= 0.5): a real ``vllm serve``.

speculators 0.3.0 drives vLLM's engine pieces itself (``verify/payloads/extract.py``, the
"generator" generation). speculators >= 0.5 does not: vLLM serves the target model with its own
``extract_hidden_states`` speculative method and a KV connector that writes each request's
hidden states to a safetensors file, and speculators' client sends the dataset over HTTP. A
target says which it is (``generation`` in target.toml); ``nox -s verify`` and the GPU session
run that path. This package is the served one:

- ``server.py``: a server process on loopback in its own process group, ready or failing with
  its cause, stopped on every way out;
- ``launch.py``: the ``vllm serve`` command as speculators' launcher builds it (the layers, the
  speculative config, the connector's ``--kv-transfer-config`` from hs-connectors' own
  backends);
- ``plan.py``: what a run serves and asks (model, layers, connectors, dataset, steps);
- ``files.py``: the hidden-state files read back (plain and FP8) and checked against
  transformers and against the generator generation's files (shared comparison:
  ``verify.oracles.compare``; shared oracle: ``verify.oracles.reference``);
- ``verify/payloads/served_pipeline.py`` (run by the venv's python): speculators' own
  training-side objects on the files: its config resolution, vocabulary mapping, draft model, data
  loader, a forward pass, and on a GPU its trainer;
- ``steps.py``: the user's commands against the servers (``prepare-data``,
  ``generate-offline-data``), failures explained from the servers' logs;
- ``userpath.py``: the user's path, stage by stage, and its checks; ``results.py``: what it
  did; ``cpu.py``: ``nox -s verify`` for a served target; ``report.py``: its
  ``verify-cpu.json``;
- ``gpu/``: the served target's GPU stages (``gpu/session.py``, dispatched to by the GPU
  session, :mod:`patchwheel.verify.gpu`) and its throughput beside the generator's
  (``gpu/compare.py``).
"""
