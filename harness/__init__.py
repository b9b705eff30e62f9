"""The benchmark harness: everything that is not operator-specific.

``operator`` and ``registry`` are the authoring surface; the sub-packages do one job each:
``measure`` (timing, accuracy, the sweep), ``report`` (metrics, records, files, tables),
``compare`` (the regression gate), ``tuning`` (stored Helion configs) and ``cli`` (the only
place that parses arguments).
"""
