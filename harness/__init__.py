"""The benchmark harness: everything that is not operator-specific.

``operator`` and ``registry`` are the authoring surface, ``settings`` and ``metrics`` (the metric
table and the cell data it computes from) the leaves every package reads; the other sub-packages
do one job each: ``measure`` (timers, accuracy, one cell), ``sweep`` (running cells: in process,
isolated, sharded, ranked), ``report`` (records, files, tables, exporters), ``compare`` (the
regression gate), ``tuning`` (stored Helion configs and their tuner), ``tritonbench`` (our backends in
tritonbench's runner) and ``cli`` (the only harness package that parses arguments; the benchmark run
is its sub-package ``cli.run``, each subcommand a module).
"""
