"""Running sweeps: what one sweep runs (:mod:`~harness.sweep.spec`), the shapes x backends loop
(:mod:`~harness.sweep.runner`), one shape in this process or in an isolated worker, the fresh
process that goes on after a poisoned CUDA context, shards and torchrun ranks."""
