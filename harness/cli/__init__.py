"""The command line: ``run.py`` and its subcommands; the only harness package that parses arguments.

:mod:`~harness.cli.main` dispatches to the benchmark run (the sub-package :mod:`harness.cli.run`)
or to a subcommand (one module each); :mod:`~harness.cli.args` holds the pieces they share.
"""
