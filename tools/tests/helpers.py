"""What the unit tests share: where the fixtures are, and the one way to
read one."""
from __future__ import annotations

import os

from detach_tools.files import JsonObj, load_json

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def load(name: str) -> JsonObj:
    doc: JsonObj = load_json(fixture(name))
    return doc


def expand(hist: dict[int, int]) -> list[int]:
    """The sorted samples a histogram {value: count} counts."""
    return sorted(v for v, c in hist.items() for _ in range(c))


def nearest_rank(sorted_v: list[int] | list[float], p: float) -> float:
    """The textbook definition, independently of detach_tools.stats: the
    smallest sample with at least p percent of the samples at or below it."""
    n = len(sorted_v)
    for v in sorted_v:
        if 100 * sum(1 for x in sorted_v if x <= v) >= p * n:
            return v
    return sorted_v[-1]
