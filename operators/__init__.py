"""The built-in operators, one sub-package each (``operators/<name>/operator.py``).

:mod:`harness.registry` finds them: each ``operator.py`` decorates its class with
``harness.registry.register_operator``.  Shared helpers: ``compile_support`` (torch.compile
settings) and ``skips`` (backends that cannot run on a device and dtype).
"""
