"""Job functions for tests/test_rq.py: importable by an ``rq worker`` process
(its PYTHONPATH holds tests/)."""

from __future__ import annotations

import time


def add(a: int, b: int) -> int:
    return a + b


def scale(values: list[float], k: float) -> list[float]:
    time.sleep(0.05)
    return [v * k for v in values]


def boom() -> None:
    raise ValueError("boom from a job")
