"""GPU verification: the built wheels on a CUDA machine, checked and timed.

    python -m patchwheel.verify.gpu --target T [--wheelhouse DIR] [--use-system-torch]
        [--model PATH] [--tp N] [--prompts N] [--prompt-len L]      (or: nox -s gpu -- …)

1. Refuses clearly without a CUDA GPU (or with fewer GPUs than ``--tp``).
2. Installs the target's built speculators and vllm wheels: from an offline wheelhouse
   (``nox -s wheelhouse``) or from ``build/<target>/simple``; with ``--use-system-torch`` into a
   folder beside the machine's own torch (NGC-style images), else into a fresh venv. Proves
   the built wheels are what got installed (the wheel's sha256 against the manifest, every
   installed file against the wheel's RECORD).
3. Runs speculators' own VllmHiddenStatesGenerator on a tiny random Llama (two ``generate``
   calls, prompts longer than one step) at tensor parallel 1 and ``--tp``, and compares every
   tensor with transformers on the same weights.
4. Times extraction and vLLM's own ``LLM.generate(max_tokens=1)`` prefill on the same prompts
   and a model big enough to load the GPU (generated unless ``--model`` is given).
5. Writes ``build/<target>/verify-gpu.json``: GPU, compute capability, driver, CUDA, torch,
   wheel sha256s, layers, max error per layer, tokens/s of both sides, their ratio, TP size.

Only the standard library, rich, torch and transformers are imported here, so the module runs
on an air-gapped GPU machine from a plain checkout (``PYTHONPATH=src``). No GPU architecture is
assumed: vLLM picks its kernels for whatever device it finds.
"""
