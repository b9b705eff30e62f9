"""Statistics behind ``run.py compare``: ratios of medians, their bootstrap CI, and tests.

Each side of a cell is a short list of repeat medians (one per independent repeat of the
cell).  The ratio of a cell is ``median(current) / median(baseline)``; its 95% confidence
interval comes from a percentile bootstrap that resamples each side independently; the
one-sided Mann-Whitney tests (exact permutation tests of the rank sum, ties at mean rank)
say whether the current repeats are slower (or faster), and
the Benjamini-Hochberg procedure adjusts their p-values over all the cells tested.
"""

from __future__ import annotations

import functools
import itertools
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
    """One-sided Mann-Whitney p-values: (current slower than baseline, current faster).

    An exact permutation test of the current side's rank sum, with tied values given their
    mean rank.  Repeat medians of small cells tie often (CUDA event times are quantized):
    scipy's exact method assumes no ties (its p-values are then too small), and its normal
    approximation for 7 against 7 is several times larger than the exact 1/3432 of a clean
    split.  Every split of the pooled repeats is enumerated while there are at most
    ``_EXACT_SPLITS``; beyond that, a seeded random sample of splits estimates the p-values.
    """
    pooled = np.concatenate([np.asarray(current, dtype=np.float64), np.asarray(baseline, dtype=np.float64)])
    ranks = stats.rankdata(pooled)
    n = len(current)
    observed = ranks[:n].sum()
    sums = ranks[_current_sides(len(pooled), n)].sum(axis=1)
    tolerance = 1e-9 * observed
    return float(np.mean(sums >= observed - tolerance)), float(np.mean(sums <= observed + tolerance))


_EXACT_SPLITS = 200_000
_RANDOM_SPLITS = 20_000


@functools.cache
def _current_sides(total: int, n: int) -> np.ndarray:
    """Index sets the current side can take among ``total`` pooled repeats: every one, or a sample.

    The observed split (the first ``n`` indices) is always included, so no p-value is 0.
    """
    if math.comb(total, n) <= _EXACT_SPLITS:
        return np.array(list(itertools.combinations(range(total), n)), dtype=np.intp)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    sample = np.argsort(rng.random((_RANDOM_SPLITS, total)), axis=1)[:, :n]
    return np.vstack([np.arange(n, dtype=np.intp), sample])


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
