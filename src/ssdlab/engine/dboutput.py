"""What the database benchmark parsers share: their error and their typed look-ups.

:mod:`ssdlab.engine.sysbench` and :mod:`ssdlab.engine.pgbench` read the text the tools
print. Whatever is missing, garbled or reports a failure raises :class:`DbOutputError`,
whose message is one line that names the tool (``sysbench output: ...``) and what is
wrong. The look-ups below search a text for a labelled value with a regular expression
and convert it, raising that error when the value is absent or out of range.

Numbers are matched with bounded digit counts (:data:`INT`, :data:`DECIMAL`), so that no
input, however long or odd, makes a conversion fail with anything but
:class:`DbOutputError` (Python refuses ``int()`` of more than 4300 digits).
"""

from __future__ import annotations

import math
import re

from ssdlab.errors import ExitCode, UserError

__all__ = [
    "DECIMAL",
    "INT",
    "DbOutputError",
    "clip",
    "decimal",
    "integer",
    "one_line",
    "output_error",
    "quote",
    "search",
]

#: an unsigned integer as the tools print it (at most 19 digits: fits in int64)
INT = r"\d{1,19}"
#: an unsigned decimal number as printf's %f prints it
DECIMAL = r"\d{1,20}(?:\.\d{1,20})?"

_QUOTE_CHARS = 200


class DbOutputError(UserError):
    """A database benchmark's output is missing, truncated, garbled or reports an error.

    The message is always one line (whitespace runs, line ends among them, become one
    space), starting with the tool's name.
    """

    exit_code = ExitCode.FAILURE

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(one_line(message), exit_code)


def output_error(tool: str, problem: str) -> DbOutputError:
    """``<tool> output: <problem>`` as a :class:`DbOutputError`."""
    return DbOutputError(f"{tool} output: {problem}")


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line ends too) made one space."""
    return " ".join(text.split())


def clip(text: str) -> str:
    """``text`` on one line, cut to 200 characters: a tool's line in an error message."""
    line = one_line(text)
    return line if len(line) <= _QUOTE_CHARS else line[:_QUOTE_CHARS] + "..."


def quote(text: str) -> str:
    """:func:`clip` of ``text``, in quotes."""
    return repr(clip(text))


def search(pattern: re.Pattern[str], text: str, tool: str, what: str) -> re.Match[str]:
    """The first match of ``pattern`` in ``text``; ``what`` names it when there is none."""
    match = pattern.search(text)
    if match is None:
        raise output_error(tool, f"no {what} (is the output complete?)")
    return match


def integer(match: re.Match[str], group: int | str, tool: str) -> int:
    """A matched group of digits (:data:`INT`) as an int."""
    return int(_group(match, group, tool))


def decimal(match: re.Match[str], group: int | str, tool: str) -> float:
    """A matched number as a finite float (:data:`DECIMAL`, or any text float() reads)."""
    text = _group(match, group, tool)
    try:
        value = float(text)
    except ValueError:
        raise output_error(tool, f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise output_error(tool, f"{text!r} is not a finite number")
    return value


def _group(match: re.Match[str], group: int | str, tool: str) -> str:
    text = match.group(group)
    if text is None:  # an optional group that did not take part: a bug in a pattern
        raise output_error(tool, f"no value for {group!r} in {quote(match.group(0))}")
    return text
