"""Where the detach command, the measurement programs and the build load's
C tree are, for the two places this package lives:

  a checkout   tools/detach_tools: the checkout's build/detach, build/bench/
               and the checkout itself (DETACH_ROOT names one explicitly);
  installed    PREFIX/lib/detach/python/detach_tools (`make install`, the
               .deb): PREFIX/bin/detach, PREFIX/lib/detach/bench/ and
               PREFIX/share/detach/build-load.

DETACH_BIN overrides the command (`detach bench` sets it to itself)."""
from __future__ import annotations

import os

PKG = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.path.normpath(os.path.join(PKG, "..", "..", "..", ".."))   # when installed


def source_root() -> str | None:
    """The checkout this package belongs to, or None when it is installed."""
    env = os.environ.get("DETACH_ROOT")
    if env:
        return env
    root = os.path.dirname(os.path.dirname(PKG))
    return root if os.path.isdir(os.path.join(root, "src", "runtime")) else None


def detach_bin() -> str:
    env = os.environ.get("DETACH_BIN")
    if env:
        return env
    root = source_root()
    return os.path.join(root, "build", "detach") if root else os.path.join(PREFIX, "bin", "detach")


def program(name: str) -> str:
    """A measurement program (bench/NAME.c, built)."""
    root = source_root()
    return (os.path.join(root, "build", "bench", name) if root
            else os.path.join(PREFIX, "lib", "detach", "bench", name))


def load_tree() -> str:
    """The C tree that the quick build load compiles: the checkout, or the
    copy `make install` puts in share/detach/build-load."""
    return source_root() or os.path.join(PREFIX, "share", "detach", "build-load")


def results_base() -> str:
    """Where runs write by default: the checkout's results/, else ./results."""
    return os.path.join(source_root() or os.getcwd(), "results")
