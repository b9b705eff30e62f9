"""argparse value types that reject bad numbers and empty lists with a one-line message."""

from __future__ import annotations

import argparse
import math


def comma_list(text: str) -> list[str]:
    """A non-empty comma-separated list, duplicates dropped, order kept."""
    items = list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing")
    return items


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from exc
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from exc
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value
