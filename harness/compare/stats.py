"""Statistics behind ``run.py compare``: the spread of repeat medians and the bootstrap interval
of a cell's ratio of medians.

Each side of a cell is a short list of repeat medians (one per independent repeat of the
cell).  The ratio of a cell is ``median(current) / median(baseline)``; its 95% confidence
interval comes from a percentile bootstrap that resamples each side independently.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95


def relative_spread(values: Sequence[float]) -> float:
    """Half the p20-p80 range of ``values`` over their median (0.01 means +-1%)."""
    p20, p50, p80 = np.percentile(np.asarray(values, dtype=np.float64), [20, 50, 80])
    return float((p80 - p20) / (2 * p50))


def ratio_ci(baseline: Sequence[float], current: Sequence[float], samples: int) -> tuple[float, float]:
    """Percentile-bootstrap 95% CI of the ratio of medians, each side resampled on its own.

    The generator is seeded afresh for every cell, so a cell's interval does not depend on
    which other cells the files hold.
    """
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    base = np.asarray(baseline, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    base_medians = np.median(rng.choice(base, size=(samples, base.size)), axis=1)
    cur_medians = np.median(rng.choice(cur, size=(samples, cur.size)), axis=1)
    tail = 100 * (1 - CI_LEVEL) / 2
    low, high = np.percentile(cur_medians / base_medians, [tail, 100 - tail])
    return float(low), float(high)
