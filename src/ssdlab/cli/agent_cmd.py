"""``ssdlab agent VERB``: the host side of a run on several hosts (run/agent.py).

A coordinator runs these through ssh; each prints one JSON object on stdout. A refusal
prints ``{"error": ..., "exit": N}`` there too (and the usual one line on stderr) and
exits N.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ssdlab.cli.common import add_command, add_opt
from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record
from ssdlab.plan.optionsets import destroy_data_opt

DESCRIPTION = """The host side of a run on several hosts: a coordinator runs these
through ssh (docs/hosts.md). Each prints one JSON object. `serve` runs fio's server on a
private Unix socket (never a TCP port) for as long as its standard input stays open, and
only after this host's own guardrails accepted every target."""


def register(sub: Any) -> None:
    agent = sub.add_parser("agent", help="the host side of a run on several hosts",
                           description=DESCRIPTION)
    verbs = agent.add_subparsers(dest="verb", metavar="VERB", required=True)
    add_command(verbs, "hello", _hello, help="versions, clock and identity of this host")
    check = add_command(verbs, "check", _check, help="this host's guardrails on a target")
    _target_options(check)
    purge = add_command(verbs, "purge", _purge, help="purge a target's range")
    _target_options(purge)
    purge.add_argument("--method", required=True)
    purge.add_argument("--offset", type=int, required=True)
    purge.add_argument("--size", type=int, required=True)
    purge.add_argument("--token", help="the serve holding the target (its hold is ours)")
    truth = add_command(verbs, "truth", _truth,
                        help="the emulated SSD's ground truth and the health log")
    truth.add_argument("--target", required=True)
    control = add_command(verbs, "control", _control,
                          help="a control command to the emulated SSD behind a target")
    control.add_argument("--target", required=True)
    control.add_argument("--command", required=True, dest="emu_command")
    probe = add_command(verbs, "probe", _probe, help="whether a target still reads")
    probe.add_argument("--target", required=True)
    _dir_verbs(verbs)
    serve = add_command(verbs, "serve", _serve,
                        help="fio's server on a private socket, while stdin stays open")
    _target_options(serve, many=True)
    serve.add_argument("--token", required=True,
                       help="the coordinator's name for the socket directory")


def _dir_verbs(verbs: Any) -> None:
    """A --dir on this host (run/host_dirs.py): checked, a work directory made, removed."""
    found = add_command(verbs, "dir", _dir, help="this host's checks of a --dir")
    found.add_argument("--dir", required=True)
    found.add_argument("--needed", type=int, required=True, help="bytes the run needs there")
    work = add_command(verbs, "workdir", _workdir,
                       help="a work directory in a --dir, with ssdlab's test file in it")
    work.add_argument("--dir", required=True)
    work.add_argument("--needed", type=int, required=True, help="bytes the run needs there")
    work.add_argument("--size", type=int, required=True, help="the test file's size")
    work.add_argument("--file", required=True, help="the test file's name")
    remove = add_command(verbs, "rmwork", _rmwork, help="remove a work directory ssdlab made")
    remove.add_argument("--dir", required=True)


def _dir(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent, host_dirs
    return _answer(lambda: host_dirs.check_dir(args.dir, args.needed, agent.hello("fio")))


def _workdir(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import host_dirs
    return _answer(lambda: host_dirs.make_work(args.dir, args.needed, args.size, args.file))


def _rmwork(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import host_dirs
    return _answer(lambda: host_dirs.remove_work(args.dir))


def _target_options(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    parser.add_argument("--target", required=True, action="append" if many else "store")
    add_opt(parser, destroy_data_opt(None))
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--fio", default="fio")


def _refused(err: UserError) -> None:
    """The refusal as the one JSON object the coordinator reads."""
    from ssdlab.run.agent_wire import ErrorAnswer
    print(json.dumps(ErrorAnswer(err.message, int(err.exit_code)).to_json()))


def _answer(work: Callable[[], Record]) -> int:
    try:
        message = work()
    except UserError as err:
        _refused(err)
        raise
    print(json.dumps(message.to_json(), default=str))
    return 0


def _hello(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent
    return _answer(lambda: agent.hello("fio"))


def _check(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent
    return _answer(lambda: agent.check_answer(args.target, args.destroy_data, args.fio,
                                              read_only=args.read_only))


def _purge(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent
    return _answer(lambda: agent.purge(args.target, args.destroy_data, args.method,
                                       args.offset, args.size, args.token))


def _truth(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent
    return _answer(lambda: agent.truth(args.target))


def _control(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent
    return _answer(lambda: agent.control(args.target, args.emu_command))


def _probe(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent
    return _answer(lambda: agent.probe(args.target))


def _serve(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import agent
    try:
        return agent.serve(args.token, args.target, args.destroy_data, args.fio,
                           read_only=args.read_only)
    except UserError as err:
        _refused(err)
        sys.stdout.flush()
        raise
