"""python3 -m detach_tools TOOL [OPTIONS]: runs one of the tools."""
from __future__ import annotations

import sys
from collections.abc import Callable

from .errors import EXIT_USAGE, error

USAGE = ("usage: python3 -m detach_tools {bench,scale,latency,fwdcost,spawncost} [OPTIONS]\n"
         "  bench     the paper's evaluation (what `detach bench` runs)\n"
         "  scale     a noise trace's slowdown at 10^3..10^6 MPI ranks (`detach scale`)\n"
         "  latency   cyclictest and oslat, plain vs detached vs floor\n"
         "  fwdcost   cost of a forwarded system call, native vs detached\n"
         "  spawncost cost of fork, pthread_create and start-up, native vs detached\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if argv else EXIT_USAGE
    tool, rest = argv[0], argv[1:]
    try:
        run = load(tool)
    except ModuleNotFoundError as e:
        if e.name != "psutil":
            raise
        error("the Python module psutil is missing (the tools' one dependency)",
              "run 'make deps' in a checkout; elsewhere 'apt-get install python3-psutil' or 'pip install psutil'")
        return 1
    if run is None:
        error(f"unknown tool '{tool}'", "choose bench, scale, latency, fwdcost or spawncost")
        return EXIT_USAGE
    return run(rest)


def load(tool: str) -> Callable[[list[str]], int] | None:
    """The main() of a tool, None for an unknown one."""
    run: Callable[[list[str]], int]
    if tool == "bench":
        from .bench.cli import main as run
    elif tool == "scale":
        from .scale import main as run
    elif tool == "latency":
        from .latency import main as run
    elif tool == "fwdcost":
        from .fwdcost import main as run
    elif tool == "spawncost":
        from .spawncost import main as run
    else:
        return None
    return run


if __name__ == "__main__":
    sys.exit(main())
