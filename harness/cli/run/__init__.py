"""The benchmark run, ``run.py [options]``: its parser (:mod:`~harness.cli.run.parser`), the run
itself, from options to settings, sweeps and records (:mod:`~harness.cli.run.command`), what it
leaves behind (:mod:`~harness.cli.run.output`: tables, result file, plot, exit status) and the
run of one torchrun rank (:mod:`~harness.cli.run.ranked`).

:func:`run_command` is the entry point the dispatcher (:mod:`harness.cli.main`) calls.
"""

from harness.cli.run.command import run_command

__all__ = ["run_command"]
