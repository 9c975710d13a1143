"""Entry point: parse, dispatch, and map errors to exit codes (docs/exit-codes.md)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from ssdlab import __version__
from ssdlab.cli import (
    agent_cmd,
    array_cmd,
    db_cmd,
    demo_cmd,
    emulator_cmd,
    query_cmd,
    reference_cmd,
    report_cmd,
    resume_cmd,
    run_cmd,
    serve_cmd,
    store_cmd,
)
from ssdlab.errors import ExitCode, UserError, command, set_command
from ssdlab.store.masking import has_password, mask_text

EPILOG = """exit codes:
  0    success
  1    a test failed (fio or device error); completed results are kept
  2    bad command line or option value
  3    target refused (missing, too small, mounted, holds the system, no --destroy-data)
  4    environment problem (fio missing or too old, results store unusable)
  5    no such run in the results store
  130  interrupted by Ctrl-C or SIGTERM; every completed round is kept

Results go to an SQLite store: --store, else $SSDLAB_STORE, else
~/.local/share/ssdlab/results.sqlite, or to a PostgreSQL database (keep its
password in ~/.pgpass or $PGPASSWORD, not on the command line). Passwords and
tokens are never stored or shown: ssdlab masks them (***). While fio runs, idle
CPUs poll instead of sleeping (a 0 us wake-up latency limit held on
/dev/cpu_dma_latency, as cyclictest does), so that latencies measure the drive,
not the CPUs waking up;
SSDLAB_CPU_IDLE=system leaves the host's own idle policy (docs/host.md).
Documentation: docs/ in the source tree."""


class _WholeWords(argparse.HelpFormatter):
    """Option help wrapped between words only: never inside a word or at its hyphens (an
    engine name such as ``io_uring+fixedbufs+registerfiles`` stays whole on a line)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_long_words=False,
                             break_on_hyphens=False)


class _RawDescription(argparse.RawDescriptionHelpFormatter, _WholeWords):
    """The top level's: its description and epilog as written, option help whole words."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit code 2; option help
    wrapped between words only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _WholeWords)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        words = self.prog.split()[1:]  # "ssdlab run pts": the command's own words
        raise UserError(f"{message} (see `{' '.join([command(), *words])} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ssdlab",
        description="A storage test lab in software: the SNIA PTS and the reviews' tests "
        "on fio, with honest steady state and every result kept.",
        epilog=EPILOG,
        formatter_class=_RawDescription,
    )
    parser.add_argument("--version", action="version", version=f"ssdlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run_cmd.register(sub)
    demo_cmd.register(sub)
    query_cmd.register(sub)
    store_cmd.register(sub)
    report_cmd.register(sub)
    resume_cmd.register(sub)
    emulator_cmd.register(sub)
    array_cmd.register(sub)
    db_cmd.register(sub)
    agent_cmd.register(sub)
    reference_cmd.register(sub)
    serve_cmd.register(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM is handled like Ctrl-C: fio is stopped and completed rounds are kept."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        if not getattr(args, "func", None):
            parser.print_help()
            return int(ExitCode.USAGE)
        code = int(args.func(args, args_list))
        _store_password_notice(args)  # last: a refusal stays one line
        return code
    except UserError as exc:
        sys.stdout.flush()
        print(f"Error: {mask_text(exc.message)}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:  # e.g. `ssdlab export RUN | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.OK)


def invoked_as(argv0: str, *, python: str = sys.executable, path: str | None = None) -> str:
    """What hints should tell the user to type to run this ssdlab (``argv0``: how it was
    started, ``sys.argv[0]``): its name (``ssdlab``) when that name on ``path`` (default:
    $PATH) is this very command, else the path it was started by, as the shell needs it
    (``.venv/bin/ssdlab``). Started as ``python -m ssdlab``: the ``ssdlab`` script beside
    that python, else ``PYTHON -m ssdlab``."""
    if os.path.basename(argv0) == "__main__.py":
        script = os.path.join(os.path.dirname(python), "ssdlab")
        if not os.path.isfile(script):
            return f"{shlex.quote(python)} -m ssdlab"
        argv0 = script
    name = os.path.basename(argv0)
    found = shutil.which(name, path=path)
    try:
        same = found is not None and os.path.samefile(found, argv0)
    except OSError:
        same = False
    return name if same else shlex.quote(argv0)


def _store_password_notice(args: argparse.Namespace) -> None:
    """One line on standard error when ``--store`` on the command line holds a password:
    ssdlab masks it everywhere, but other users see command lines (``ps``)."""
    store = getattr(args, "store", None)
    if (isinstance(store, str) and store.lower().startswith(("postgresql:", "postgres:"))
            and has_password(store)):
        print("Note: the --store URL holds a password, which other users of this machine "
              "can see in the process list and your shell keeps in its history; ssdlab "
              "stores and shows it as ***. Keep it in ~/.pgpass, $PGPASSWORD or a "
              "service file instead (docs/store.md)", file=sys.stderr, flush=True)


def entry() -> None:
    """The ``ssdlab`` command (and ``python -m ssdlab``)."""
    set_command(invoked_as(sys.argv[0]))
    sys.exit(main())
