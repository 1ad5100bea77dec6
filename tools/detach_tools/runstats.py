"""What `detach run --stats FILE` writes (docs/schema/run-stats.schema.json,
src/runtime/stats.c), read in one place: the bench's probe of a working
runtime and the latency run's evidence of a detached thread."""
from __future__ import annotations

from .files import JsonObj, load_json


def read(path: str) -> JsonObj:
    """The statistics in path: OSError when there are none, ValueError
    when they are not an object with a list of threads."""
    st = load_json(path)
    if not isinstance(st, dict) or not isinstance(st.get("threads"), list):
        raise ValueError(f"{path}: not the statistics of detach run (no list of threads)")
    return st


def threads(st: JsonObj) -> list[JsonObj]:
    """Every detached thread of the statistics."""
    return [t for t in st["threads"] if isinstance(t, dict)]


def threads_on(st: JsonObj, cpu: int) -> list[JsonObj]:
    """The threads that were detached on cpu."""
    return [t for t in threads(st) if t.get("cpu") == cpu]
