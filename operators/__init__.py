"""The built-in operators, one sub-package each (``operators/<name>/operator.py``).

:mod:`harness.registry` finds them: it imports each ``operator.py`` and registers the
``BenchmarkOperator`` subclass defined there.  Shared helpers: ``compile_support`` (torch.compile
settings), ``peers_support`` (the optional peer libraries) and ``skips`` (backends that cannot
run on a device and dtype).
"""
