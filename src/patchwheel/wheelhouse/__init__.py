"""The offline wheelhouse: a target's built wheels plus the dependency closure they need.

For GPU machines without network that bring their own torch. ``make_wheelhouse`` reads
``build/<target>/manifest.json``, resolves the closure of the chosen wheels for a *foreign*
interpreter and platform, binary only, as of a date (by default the upload time of the newest
pinned upstream file), minus what the destination already has (a ``pip list --format=freeze``
of it), downloads each wheel into patchwheel's cache (sha256-verified) and writes one folder:

    build/<target>/wheelhouse/
        *.whl                  every wheel to install (or NAME.001 … parts with --split)
        requirements.txt       name==version --hash=sha256:… for each wheel
        wheelhouse.lock.json   what, why, from where, sha256s, the install commands
        INSTALL.txt            the exact offline install commands
        SHA256SUMS             ``sha256sum -c`` format
        join.py                stdlib-only: joins parts and checks every sha256

How installed packages are honoured: each becomes a stub wheel of its exact installed version
that needs nothing (what it needs is installed too), offered to the resolver beside the index
and pinned by a constraint, so the resolution agrees with what is there and never descends into
it (the destination's torch keeps its own CUDA libraries). Only an extra asked of an installed
package (``httpx[http2]``) adds its requirements to the stub. When no solution exists, each
installed package uv names in its explanation is let go until one does; the error then lists
every requirement the installed versions fail, with the two ways out: ``--upgrade NAME`` (carry
a version that fits) or ``--accept-installed NAME`` (keep it; the lock records the mismatch).

After resolving, the metadata of every carried wheel is walked for the destination's markers:
it says why each wheel is there, re-checks the installed versions, and a package whose newer
releases have no wheel for the destination (so binary-only resolution fell back to an old one,
like deepspeed 0.3.1.dev3 of 2020) is refused unless dropped or asked for by version.

A target may keep its own defaults in ``patches/<target>/wheelhouse.toml``::

    variants = {vllm = "cuda"}             # which variant of an overlay project to carry
    with = ["REQ", …]                      # more requirements to carry
    [drop]                                 # requirements the target never imports
    deepspeed = "speculators lists it but never imports it"
    nvidia-cutlass-dsl = { why = "…", imports = ["cutlass"], tolerated-by = ["flashinfer"] }
    [environment]                          # what users set where the wheels run
    NAME = { value = "…", why = "…" }      # (INSTALL.txt step 5)

The GPU session checks the drop list against an import trace of its runs (``imports``: the
modules that would be the dropped requirement) and runs with INSTALL.txt's variables only.
"""
