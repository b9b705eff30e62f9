"""Fixtures of the operator tests.  Nothing here imports triton at import time: the root
conftest turns Triton's interpreter on after the conftest files are loaded."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def narrow_bwd_rules(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], None]]:
    """``narrow(divisor)`` divides every padded width of ``strategy.BWD_RULES`` by ``divisor`` for
    one test, so that rows a few hundred wide take the wide-row strategies under the interpreter."""
    from operators.rms_norm import strategy, triton_plans

    def clear_caches() -> None:
        strategy.bwd_strategy.cache_clear()
        triton_plans.bwd_plan.cache_clear()

    def narrow(divisor: int) -> None:
        def narrowed(width: int) -> int:
            return width if width == strategy.WIDEST else max(1, width // divisor)

        rules = tuple(dataclasses.replace(rule, widths=(narrowed(rule.widths[0]), narrowed(rule.widths[1])))
                      for rule in strategy.BWD_RULES)
        monkeypatch.setattr(strategy, "BWD_RULES", rules)
        clear_caches()

    yield narrow
    clear_caches()


@pytest.fixture(scope="module")
def allow_tf32() -> Iterator[None]:
    """fp32 matmuls may use TF32 for a whole module (:func:`tests.helpers.tf32_allowed`)."""
    from tests.helpers import tf32_allowed

    with tf32_allowed():
        yield
