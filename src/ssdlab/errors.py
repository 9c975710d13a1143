"""The one user-facing error type, the documented exit codes, and how hints name the
command.

Anything raised that is not a :class:`UserError` is a bug and may show a traceback.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Exit codes of the ``ssdlab`` command (documented in docs/exit-codes.md)."""

    OK = 0
    FAILURE = 1  # a run finished but a test failed (fio error, device error)
    USAGE = 2  # bad command line, bad option value, bad config
    TARGET = 3  # target refused: missing, too small, mounted, root disk, no --destroy-data
    ENVIRONMENT = 4  # fio missing or too old, other tool missing, store unusable
    NOT_FOUND = 5  # no such run in the store
    INTERRUPTED = 130  # Ctrl-C / SIGINT; completed rounds are kept


class UserError(Exception):
    """An error the user can fix. Printed as one line ``Error: ...`` with no traceback."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0])


class TargetError(UserError):
    """The target cannot be used (and nothing was written to it)."""

    exit_code = ExitCode.TARGET


class EnvironmentProblem(UserError):
    """A required tool is missing or unusable (fio, blkdiscard, the store)."""

    exit_code = ExitCode.ENVIRONMENT


class RunNotFound(UserError):
    """The run id or prefix given matches no run in the store."""

    exit_code = ExitCode.NOT_FOUND


#: what hints tell the user to type to run ssdlab; see :func:`command`
_COMMAND = ["ssdlab"]


def command() -> str:
    """The command a hint names (``see `ssdlab show RUN```): ``ssdlab`` when that name on
    PATH runs this very ssdlab, else the path it was started by (``.venv/bin/ssdlab``),
    as the command-line entry point found it (``cli/main.py``); ``ssdlab`` when ssdlab is
    used as a library."""
    return _COMMAND[0]


def set_command(text: str) -> None:
    """Name the command as :func:`command` gives it (the entry point does, once)."""
    _COMMAND[0] = text
