"""GPU probes of the gemm kernels: scripts that time variants of a live kernel, one question each
(their findings are in ``results/h200/gemm/NOTES.md``)."""
