"""``ssdlab resume RUN``: continue a stopped run from its last completed round; ``ssdlab
resume SET``: every stopped run of a set, at once again."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ssdlab.cli.common import (
    add_command,
    add_destroy_data_option,
    add_store_option,
    open_existing_store,
    open_store,
    store_path,
)
from ssdlab.cli.set_cmd import report, set_host, set_members
from ssdlab.errors import ExitCode, UserError, command
from ssdlab.store.records import RunData
from ssdlab.suites import Suite, find

if TYPE_CHECKING:
    from ssdlab.engine.runner import Executor
    from ssdlab.run.progress import Progress
    from ssdlab.store.db import Store


def _resumable() -> str:
    """The suites whose runs can be resumed, as a list in words."""
    from ssdlab.suites import runnable
    names = [s.name for s in runnable() if s.spec.resumable]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def register(sub: Any) -> None:
    p = add_command(
        sub, "resume", resume_command,
        help="continue a stopped run (Ctrl-C, crash, power loss) from its last completed round",
        description=f"""Continues a run that did not complete: finished tests stay as they
        are, the test that was running goes on after its last completed round (no new purge
        or preconditioning: the drive keeps its state; the idle time is recorded), the rest
        run as planned. A PTS run that --predict stopped at a predicted steady state goes
        on the same way, its predicted tests to the SNIA rule. The target must be the same
        one (path, model, serial, size). Works for the {_resumable()} suites.""",
    )
    p.add_argument("run", metavar="RUN", help="run id, unique prefix, or 'last'; or a set "
                   "id (set-...): its stopped runs go on at once again (docs/sets.md)")
    add_destroy_data_option(p, "; needed again to resume on a block device (put it after "
                            "RUN, or use the = form)")
    p.add_argument("--fio", default="fio", metavar="PATH", help="fio binary (default: fio)")
    add_store_option(p)


def _alive_elsewhere(run: RunData) -> int | None:
    """The pid of a process still running this run on this machine, if there is one."""
    from ssdlab.run.session import boot_id
    events = [e for e in run.events if e.kind == "process" and e.detail]
    if not events or run.status != "running":
        return None
    detail = events[-1].detail or {}
    pid = int(detail.get("pid", 0))
    if pid <= 0 or pid == os.getpid() or detail.get("boot_id") != boot_id():
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return None
    return pid if b"ssdlab" in cmdline else None


def to_resume(run: RunData) -> bool:
    """Whether ``run`` has anything left: it did not complete, or --predict stopped a test
    that can go on to the SNIA rule."""
    return run.status != "complete" or any(t.status == "predicted" for t in run.tests)


def check_resumable(run: RunData) -> None:
    if run.read_only:
        raise UserError(f"run {run.run_id} is a read-only reference run; nothing to resume")
    if not to_resume(run):
        raise UserError(f"run {run.run_id} is complete; nothing to resume")
    pid = _alive_elsewhere(run)
    if pid is not None:
        raise UserError(f"run {run.run_id} is still running in process {pid}; stop it first "
                        "(Ctrl-C or kill), then resume")


def _resume_registered(suite: Suite, run: RunData, args: argparse.Namespace,
                       argv: list[str]) -> None:
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.prepare import TargetRequest
    runner = suite.runner()
    if not suite.spec.resumable or runner.prepare_resume is None:
        raise UserError(f"runs of the {run.suite} suite cannot be resumed; run it again")
    request = TargetRequest(str(run.target.get("path")), None, None, args.destroy_data,
                            args.fio)
    prepared = runner.prepare_resume(run, request)
    progress = runner.progress(prepared)
    with open_store(args) as store:
        try:
            executor = FioExecutor(args.fio, read_only=runner.read_only(prepared))
            runner.resume(prepared, store, executor, progress, store.load(run.run_id), argv)
        finally:
            progress.close()


def resume_set(set_id: str, args: argparse.Namespace, argv: list[str]) -> int:
    """Continue every stopped run of the set ``set_id``, at once again."""
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.prepare import TargetRequest
    from ssdlab.run.set_run import SetRun, prepare_all, set_requests, short_names
    with open_existing_store(args) as store:
        data = store.load_set(set_id)
        runs = [store.load(run_id) for _, run_id in data.runs]
    todo = [r for r in runs if to_resume(r)]
    if not todo:
        raise UserError(f"set {set_id}: every run is complete; nothing to resume")
    for run in todo:
        check_resumable(run)
    suite = find(data.suite)
    runner = suite.runner() if suite is not None else None
    if suite is None or runner is None or runner.prepare_resume is None:
        raise UserError(f"runs of the {data.suite} suite cannot be resumed; run them again")
    prepare_resume = runner.prepare_resume
    targets = [str(r.target.get("path")) for r in todo]
    requests = set_requests(targets, TargetRequest(None, None, None, args.destroy_data,
                                                   args.fio))
    prepared = prepare_all([functools.partial(prepare_resume, r, q)
                            for r, q in zip(todo, requests, strict=True)], targets)

    def go(p: object, run_id: str) -> Any:
        def resume(store: Store, executor: Executor, progress: Progress) -> str:
            return runner.resume(p, store, executor, progress, store.load(run_id), argv)
        return resume

    members = set_members(short_names(targets), targets, prepared,
                       [runner.progress(p) for p in prepared],
                       [go(p, r.run_id) for p, r in zip(prepared, todo, strict=True)],
                       [r.run_id for r in todo])
    executor = FioExecutor(args.fio, read_only=any(runner.read_only(p) for p in prepared))
    outcome = SetRun(members, store_path(args), executor, host=set_host(prepared)).resume(set_id)
    return report(suite, outcome)


def resume_command(args: argparse.Namespace, argv: list[str]) -> int:
    with open_existing_store(args) as store:
        set_id = store.find_set(args.run)
        if set_id is None:
            run = store.load(store.resolve(args.run))
    if set_id is not None:
        return resume_set(set_id, args, argv)
    check_resumable(run)
    suite = find(run.suite)
    if suite is None:
        raise UserError(f"runs of the {run.suite} suite cannot be resumed; run it again")
    _resume_registered(suite, run, args, argv)
    with open_store(args) as store:
        done = store.load(run.run_id)
        path = store.path
    print(f"run {done.run_id} {done.status}; results in {path}")
    failed = [t.name for t in done.tests if t.status == "failed"]
    if failed:
        raise UserError(f"test(s) failed: {', '.join(failed)} (see `{command()} show "
                        f"{run.run_id}`)", ExitCode.FAILURE)
    return int(ExitCode.OK)
