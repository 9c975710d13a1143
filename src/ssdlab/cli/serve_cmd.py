"""``ssdlab serve``: the read-only web dashboard and Prometheus endpoint (docs/serve.md)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Any

from ssdlab.cli.common import add_command, add_store_option, store_path
from ssdlab.errors import EnvironmentProblem, ExitCode

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8421
TOKEN_ENV = "SSDLAB_SERVE_TOKEN"


def register(sub: Any) -> None:
    serve = add_command(
        sub, "serve", serve_command,
        help="a read-only web dashboard of the results store, live while runs run",
        description=f"""Serves a web dashboard of the results store: the runs (filtered
        by suite, target, model, status) and, for a running run, its progress live: the
        current test and round, the ETA, the steady-state tracking variables round by
        round with the window and the limits, per-member and per-host panels; a finished
        run links to its report. Also /metrics, the running runs' last rounds for
        Prometheus. Never writes the store, nor makes it: started before any run made
        it, the dashboard shows no runs until one does. Binds to {DEFAULT_HOST} by
        default; any other address needs an access token (--token or ${TOKEN_ENV}),
        which every request must then carry. Needs the serve extra: pip install
        'ssdlab[serve]'. Stops with Ctrl-C (exit code 130).""",
    )
    serve.add_argument("--host", default=DEFAULT_HOST, metavar="ADDRESS",
                       help=f"address to listen on (default: {DEFAULT_HOST}; any other "
                       "needs a token)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="PORT",
                       help=f"port to listen on (default: {DEFAULT_PORT}; 0: any free one)")
    serve.add_argument("--token", metavar="TOKEN",
                       help=f"access token every request must carry (default: "
                       f"${TOKEN_ENV}, the better place for it: other users see command "
                       "lines; at least 16 characters)")
    add_store_option(serve)


def _token(args: argparse.Namespace) -> str | None:
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    return token or None


def _token_notice(args: argparse.Namespace) -> None:
    """One line when the token was given on the command line (it is never shown)."""
    if args.token:
        print(f"Note: --token on the command line can be seen by other users of this machine "
              f"in the process list and stays in your shell's history; give it in "
              f"${TOKEN_ENV} instead (docs/serve.md)", file=sys.stderr, flush=True)


def serve_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.errors import UserError
    from ssdlab.serve.auth import check_bind
    from ssdlab.serve.data import NoStoreYet, open_store_readonly
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port}: give a port from 0 to 65535")
    token = _token(args)
    check_bind(args.host, token)
    location = store_path(args)
    opened = open_store_readonly(location)  # an unusable store: refused now
    opened.close()
    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise EnvironmentProblem(f"ssdlab serve needs {' and '.join(missing)} (not installed): "
                                 "pip install 'ssdlab[serve]'")
    from ssdlab.serve import app
    _token_notice(args)
    sock = app.bind(args.host, args.port)
    print(f"serving {location} at {app.url_of(sock)} (read-only"
          f"{', token required' if token else ''}); Ctrl-C stops", flush=True)
    if isinstance(opened, NoStoreYet):  # never made here: the first run makes it
        print(f"no results store at {location} yet: the dashboard shows its runs as soon "
              "as a run makes it", flush=True)
    try:
        app.serve_forever(location, token, sock)
    except KeyboardInterrupt:
        print("stopped", flush=True)
        return int(ExitCode.INTERRUPTED)
    finally:
        sock.close()
    return int(ExitCode.OK)
