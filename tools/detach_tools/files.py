"""Reading the files the tools read: a kernel file's text, a JSON document."""
from __future__ import annotations

import json
from typing import Any, overload


@overload
def read_text(path: str) -> str | None: ...
@overload
def read_text(path: str, default: str) -> str: ...


def read_text(path: str, default: str | None = None) -> str | None:
    """A file's text, stripped; default if it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def load_json(path: str) -> Any:
    """The JSON document in path (OSError, ValueError when it is not one)."""
    with open(path) as f:
        return json.load(f)


# A JSON object as the tools read it: the measurement programs' and the
# runtime's documents (docs/schema/) have the shapes their schemas give.
JsonObj = dict[str, Any]
