"""The command line: ``run.py`` and its subcommands; the only package that parses arguments."""
