"""matplotlib, the one optional dependency (`pip install './tools[plots]'`):
only the PNG plots need it.  Every table and JSON document is written
without it; a plot asked for without it is one error or warning line in the
command's format and a NOTE saying how to install it."""
from __future__ import annotations

from .errors import ToolError

INSTALL = ("install matplotlib: 'make deps' in a checkout, 'apt-get install python3-matplotlib' "
           "on Debian, or pip install './tools[plots]'")


class PlotsMissing(ToolError):
    """matplotlib cannot be imported."""


def require() -> None:
    """matplotlib, drawing to files (the Agg backend), before a caller
    imports matplotlib.pyplot; PlotsMissing when it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
    except ImportError as e:
        raise PlotsMissing(f"no plots: matplotlib is not installed ({e})", INSTALL) from None
