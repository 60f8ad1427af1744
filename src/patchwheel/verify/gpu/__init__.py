"""GPU verification: the built wheels on a CUDA machine, checked, timed and trained on.

    python -m patchwheel.verify.gpu --target T [--wheelhouse DIR] [--use-system-torch]
        [--tp N] [--families all|llama,qwen3,qwen3_moe,deepseek_v3]
        [--stages correctness,training,throughput,userjob] [--profile]
        [--baseline-speculators WHEEL] [--speculators-scripts DIR]
        [--work-dir DIR] [--report FILE]                          (or: nox -s gpu -- …)

1. Refuses clearly without a CUDA GPU (or with fewer GPUs than ``--tp``).
2. Installs the target's built speculators and vllm wheels: from an offline wheelhouse
   (``nox -s wheelhouse``) or from ``build/<target>/simple``; with ``--use-system-torch`` into a
   folder beside the machine's own torch, else into a fresh venv; a later call with the same
   ``--work-dir`` and the same wheels reuses that install. Proves the built wheels are what got
   installed (sha256 against the manifest, every installed file against the wheel's RECORD).
   Every child process then runs with the session's environment plus only what the
   wheelhouse's INSTALL.txt tells users to set, the import trace and declared hygiene
   (:mod:`.environment`); anything else is refused, naming it.
3. ``correctness`` (``generator/gpu/correctness.py``): per model family
   (:mod:`patchwheel.verify.models.families`), speculators' own VllmHiddenStatesGenerator at its
   GPU default against transformers and against the vLLM oracle (``payloads/oracle.py``), at TP
   ``--tp``; every side's effective engine settings recorded; a generator that does not accept
   a setting fails.
4. ``training`` (``generator/gpu/training.py``): a few optimizer steps of speculators' EAGLE-3
   trainer on the files step 3 extracted; the loss must be finite and decrease.
5. ``throughput`` (``generator/gpu/throughput.py``): extraction vs ``LLM.generate`` compiled
   default and eager on a ~1 B-parameter model; start-up timed the same way on every side;
   ``--profile`` adds where the driver's time goes; ``--baseline-speculators`` times a "before"
   wheel too. The user's job end to end: the extraction side also writes the training files as
   speculators' offline script does, on the RAM disk and the real disk, beside each disk's
   measured write bandwidth (``end_to_end``).
6. ``userjob`` (``generator/gpu/userjob.py``, with ``--speculators-scripts``): speculators'
   own v0.3.0 scripts, unmodified, with INSTALL.txt's environment only.
7. The import trace of every run (:mod:`.imports`): each run's modules and distributions; the
   wheelhouse's drop list checked against them.
8. Writes ``verify-gpu.json`` (only fields the code writes, schema-checked; the stages of
   earlier calls on the same build are kept) and ``verify-gpu.md`` beside it.

Only the standard library, rich, torch and transformers are imported here, so the module runs
on an air-gapped GPU machine from a plain checkout (``PYTHONPATH=src``). No GPU architecture is
assumed: vLLM picks its kernels for whatever device it finds.

This package is the session, for both generations: the machine check (:mod:`.machine`), the
install (:mod:`.install`, :mod:`.environment`), the options, the import trace and the dispatch
on the build's generation (:mod:`.session`). The stages themselves are each generation's:
``verify.generator.gpu`` (the steps above) and ``verify.served.gpu`` (a served target).
"""
