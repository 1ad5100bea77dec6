"""Every tool's messages in the command's format: `detach: error:` and a
`NOTE:` line (src/cli/main.c)."""
from __future__ import annotations

import contextlib
import io
import unittest

from detach_tools.__main__ import main as tools_main
from detach_tools.errors import EXIT_USAGE, ArgumentParser, ToolError, report


class Format(unittest.TestCase):
    def test_report(self) -> None:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = report(ToolError("it broke", "fix it", 3))
        self.assertEqual(rc, 3)
        self.assertEqual(err.getvalue(), "detach: error: it broke\nNOTE: fix it\n")

    def test_usage_error(self) -> None:
        p = ArgumentParser(prog="detach thing")
        p.add_argument("--n", type=int)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            p.parse_args(["--n", "x"])
        self.assertEqual(e.exception.code, EXIT_USAGE)
        self.assertEqual(err.getvalue().splitlines(),
                         ["detach: error: argument --n: invalid int value: 'x'",
                          "NOTE: see 'detach thing --help'"])

    def test_tools(self) -> None:
        """The tools' own refusals, through their main()."""
        for argv, first in ((["nosuch"], "detach: error: unknown tool 'nosuch'"),
                            (["bench", "--load", "nosuch"], "detach: error: unknown load 'nosuch'"),
                            (["bench", "--rt-runtime", "x"], "detach: error: bad --rt-runtime 'x'"),
                            (["bench", "-H", "1-0"], "detach: error: malformed CPU list '1-0'")):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                rc = tools_main(argv)
            lines = err.getvalue().splitlines()
            self.assertEqual(rc, EXIT_USAGE, argv)
            self.assertEqual(len(lines), 2, lines)
            self.assertEqual(lines[0], first)
            self.assertTrue(lines[1].startswith("NOTE: "), lines)


if __name__ == "__main__":
    unittest.main()
