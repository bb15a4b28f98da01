"""User errors: `UserError` (a mistake the user can fix, printed by `trl-efficient` as one line) and `CommandParser`
(the `argparse` parser of every `trl-efficient` command, whose errors raise `UserError` instead of printing the usage
block and exiting).

Why a parser class rather than patching `argparse.ArgumentParser.error` while a command runs: the patch changed every
parser of the process (a user's own script, a library's), not only ours (issue 34).
"""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["CommandParser", "UserError", "one_line"]


class UserError(ValueError):
    """A mistake the user can fix (arguments, config file, environment). `trl-efficient` prints it as one line,
    `trl-efficient: error: <message>`, and exits 2 (`--debug` re-raises it with the traceback). A `ValueError`, so
    code that catches config errors keeps working."""


def one_line(err: BaseException) -> str:
    """`err`'s message on one line (whitespace runs, newlines included, become one space).

    >>> one_line(ValueError("two\\n  lines")), one_line(KeyError())
    ('two lines', 'KeyError')
    """
    return " ".join(str(err).split()) or type(err).__name__


class CommandParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors (unknown flag, invalid choice, bad type, missing argument) raise
    `UserError("<prog>: <message> (see `<prog> --help`)")`. Its sub-parsers (`add_subparsers`) are of the same class.

    >>> parser = CommandParser(prog="trl-efficient demo")
    >>> _ = parser.add_argument("--n", type=int)
    >>> try:
    ...     parser.parse_args(["--n", "x"])
    ... except UserError as err:
    ...     print(err)
    trl-efficient demo: argument --n: invalid int value: 'x' (see `trl-efficient demo --help`)
    """

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{self.prog}: {message} (see `{self.prog} --help`)")
