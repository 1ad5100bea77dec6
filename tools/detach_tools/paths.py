"""Where the detach command and the measurement programs are.

From a checkout (this file is tools/detach_tools/paths.py) they are the
checkout's build/detach and build/bench/.  An installed `detach bench` says
where through the environment: DETACH_BIN (the command) and DETACH_PROGRAMS
(the directory holding fwq, ctlloop, fwdcost).  DETACH_ROOT names a checkout
explicitly."""
import os
import shutil


def source_root():
    """The checkout this package belongs to, or None when it is installed."""
    env = os.environ.get("DETACH_ROOT")
    if env:
        return env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return root if os.path.isdir(os.path.join(root, "src", "runtime")) else None


def detach_bin():
    env = os.environ.get("DETACH_BIN")
    if env:
        return env
    root = source_root()
    if root:
        return os.path.join(root, "build", "detach")
    return shutil.which("detach") or "detach"


def program(name):
    """A measurement program (bench/NAME.c, built)."""
    env = os.environ.get("DETACH_PROGRAMS")
    if env:
        return os.path.join(env, name)
    return os.path.join(source_root() or ".", "build", "bench", name)


def results_base():
    """Where runs write by default: the checkout's results/, else ./results."""
    return os.path.join(source_root() or os.getcwd(), "results")
