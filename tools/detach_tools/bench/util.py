"""Small helpers of the bench's modules."""
from __future__ import annotations

import os

from .. import paths
from ..errors import ToolError


def measurement_program(name: str) -> str:
    """bench/NAME.c as built (paths.program); ToolError when it is not."""
    prog = paths.program(name)
    if not os.access(prog, os.X_OK):
        raise ToolError(f"the measurement program {prog} is missing", "run 'make' first")
    return prog


def publish_summary(out_dir: str, name: str, md: str, show: bool) -> None:
    """Writes md to OUT_DIR/NAME.md, prints it when show, then its path
    (the last line: where the summary is)."""
    path = os.path.join(out_dir, f"{name}.md")
    with open(path, "w") as f:
        f.write(md)
    if show:
        print(md)
    print(path)


def fmt_dur(s: float) -> str:
    """A duration as 1h02m, 3m04s or 5s."""
    n = int(round(s))
    if n >= 3600:
        return f"{n // 3600}h{n % 3600 // 60:02d}m"
    if n >= 60:
        return f"{n // 60}m{n % 60:02d}s"
    return f"{n}s"
