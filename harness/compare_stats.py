"""Statistics behind ``run.py compare``: ratios of medians, their bootstrap CI, and tests.

Each side of a cell is a short list of repeat medians (one per independent repeat of the
cell).  The ratio of a cell is ``median(current) / median(baseline)``; its 95% confidence
interval comes from a percentile bootstrap that resamples each side independently; the
one-sided Mann-Whitney U tests say whether the current repeats are slower (or faster), and
the Benjamini-Hochberg procedure adjusts their p-values over all the cells tested.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95


def relative_spread(values: Sequence[float]) -> float:
    """Half the p20-p80 range of ``values`` over their median (0.01 means +-1%)."""
    p20, p50, p80 = np.percentile(np.asarray(values, dtype=np.float64), [20, 50, 80])
    return float((p80 - p20) / (2 * p50))


def median_ratio(baseline: Sequence[float], current: Sequence[float]) -> float:
    """``median(current) / median(baseline)``: above 1 means the current run is slower."""
    return float(np.median(current) / np.median(baseline))


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


def slower_faster_p(baseline: Sequence[float], current: Sequence[float]) -> tuple[float, float]:
    """One-sided Mann-Whitney U p-values: (current slower than baseline, current faster).

    Always the exact distribution: repeat medians of small cells tie often (CUDA event times
    are quantized), and ties would switch scipy to the normal approximation, whose p-values
    for 7 against 7 repeats are several times larger than the exact 1/3432 of a clean split.
    """
    slower = stats.mannwhitneyu(current, baseline, alternative="greater", method="exact").pvalue
    faster = stats.mannwhitneyu(current, baseline, alternative="less", method="exact").pvalue
    return float(slower), float(faster)


def smallest_p(n_baseline: int, n_current: int) -> float:
    """The smallest one-sided exact Mann-Whitney p-value ``n_baseline`` against ``n_current`` repeats allow.

    It is ``1 / C(n_baseline + n_current, n_current)``, reached when every current repeat is
    slower than every baseline repeat: 0.05 for 3 against 3, 1/70 for 4 against 4, 1/3432 for
    7 against 7.
    """
    return 1 / math.comb(n_baseline + n_current, n_current)


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, in the order given."""
    if not pvalues:
        return []
    return [float(p) for p in stats.false_discovery_control(np.asarray(pvalues), method="bh")]
