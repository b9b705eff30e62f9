"""Probes of rms_norm's kernels on a GPU: each times variants of the live kernels against a copy
of the same bytes and writes JSON records (``python -m operators.rms_norm.probes.<name> --out FILE``).
Their results and what they showed are in ``results/h200/rms_norm/`` (``NOTES.md`` numbers the probes)."""
