"""Messages in the command's format, for every tool of the package: one
`detach: error: ...` (or `detach: warning: ...`) line on stderr, then a
`NOTE: ...` line with the fix, as src/cli/main.c's cli_err, cli_warn and
cli_note write them.  A failure the user can fix is a ToolError; main()
of each tool prints it with error() and returns its status (1, or 2 for bad
usage as EXIT_USAGE in src/cli/cli.h)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

EXIT_USAGE = 2


class ToolError(Exception):
    """A failure the user can fix: its message, the NOTE with the fix (or
    None), and the exit status."""

    def __init__(self, msg: str, note: str | None = None, status: int = 1) -> None:
        super().__init__(msg)
        self.note = note
        self.status = status


def error(msg: str, note: str | None = None) -> None:
    """`detach: error: MSG`, then `NOTE: NOTE` when there is one."""
    _say("detach: error: ", msg, note)


def warn(msg: str, note: str | None = None) -> None:
    """`detach: warning: MSG`, then `NOTE: NOTE` when there is one."""
    _say("detach: warning: ", msg, note)


def report(e: ToolError) -> int:
    """Prints e as error() does; its exit status."""
    error(str(e), e.note)
    return e.status


def guard(fn: Callable[[], object]) -> int:
    """Runs fn: 0, or the status of the ToolError it raised, reported."""
    try:
        fn()
    except ToolError as e:
        return report(e)
    return 0


def _say(prefix: str, msg: str, note: str | None) -> None:
    print(prefix + msg, file=sys.stderr, flush=True)
    if note:
        print("NOTE: " + note, file=sys.stderr, flush=True)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with usage errors in the command's format (one error line and
    a NOTE naming --help, exit 2) instead of argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        error(message, f"see '{self.prog} --help'")
        sys.exit(EXIT_USAGE)
