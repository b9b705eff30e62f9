"""The command line: ``run.py`` and its subcommands; the only harness package that parses arguments."""
