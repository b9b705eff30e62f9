"""The verdicts of a comparison as text: the terminal table, the one-line summary and a PR comment."""

from __future__ import annotations

from collections import Counter

from tabulate import tabulate

from harness.compare.files import ResultFile
from harness.compare.verdicts import FAILING, VERDICTS, Row

COLUMNS = ["op", "mode", "dtype", "x_val", "backend", "baseline ms", "current ms", "ratio", "95% CI",
           "run noise", "verdict", "note"]


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table_rows(rows: list[Row]) -> list[list[str]]:
    """The rows as strings, in COLUMNS order."""
    out = []
    for row in rows:
        op, mode, dtype, x_val, backend = row.key
        ci = "-" if row.ci is None else f"[{row.ci[0]:.3f}, {row.ci[1]:.3f}]"
        out.append([op, mode, dtype, "x".join(map(str, x_val)), backend, _fmt(row.base_ms, ".4g"),
                    _fmt(row.cur_ms, ".4g"), _fmt(row.ratio, ".3f"), ci, _fmt(row.run_noise, ".1%"),
                    row.verdict, row.note])
    return out


def summary(rows: list[Row]) -> str:
    """One line: the number of cells per verdict."""
    counts = Counter(row.verdict for row in rows)
    return f"{len(rows)} cells: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS)


def _md_table(rows: list[Row]) -> str:
    cells = [[text.replace("|", "\\|") for text in row] for row in table_rows(rows)]
    return tabulate(cells, headers=COLUMNS, tablefmt="github", disable_numparse=True)


def failing_verdicts(fail_on_missing: bool) -> tuple[str, ...]:
    """The verdicts that fail the gate: always a regression or lost accuracy, optionally a missing cell."""
    return (*FAILING, "missing") if fail_on_missing else FAILING


def markdown(rows: list[Row], baselines: list[ResultFile], cur: ResultFile, failed: bool,
             reasons: list[str], notes: list[str]) -> str:
    """A pull-request comment: headline with counts, why it failed and notes on its input, the
    changed cells, then all cells collapsed."""
    changed = [row for row in rows if row.verdict != "unchanged"]
    bases = ", ".join(f"`{base.path}`" for base in baselines)
    parts = [
        f"**Performance gate: {'FAIL' if failed else 'pass'}** — {summary(rows)} ({bases} → `{cur.path}`)",
        *reasons,
        *notes,
        _md_table(changed) if changed else "No cell changed beyond its threshold.",
        f"<details><summary>All {len(rows)} cells</summary>\n\n{_md_table(rows)}\n\n</details>",
    ]
    return "\n\n".join(parts) + "\n"


