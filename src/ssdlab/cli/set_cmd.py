"""Several targets at once (a set, docs/sets.md): ``ssdlab run SUITE --target A --target B``
(or ``--targets-file``) and ``ssdlab show SET`` (``ssdlab resume SET`` is
:mod:`ssdlab.cli.resume_cmd`'s, with the helpers here). Parse, check, call
:mod:`ssdlab.run.set_run`, print each run's outcome prefixed with its target."""

from __future__ import annotations

import argparse
import functools
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ssdlab.cli.common import run_labels, store_path
from ssdlab.errors import ExitCode, UserError, command
from ssdlab.suites import Suite

if TYPE_CHECKING:
    from ssdlab.engine.runner import Executor
    from ssdlab.run.progress import Progress
    from ssdlab.run.set_run import SetMember, SetOutcome
    from ssdlab.store.db import Store
    from ssdlab.store.records import RunData

#: the longest targets file read (a file of targets is a few lines)
MAX_TARGETS_FILE_BYTES = 1 << 20


def targets_of(values: Mapping[str, object]) -> list[str]:
    """The targets given: every ``--target``, then the ``--targets-file``'s."""
    given = values.get("target")
    targets = [str(t) for t in given] if isinstance(given, list) else [str(given)] \
        if given else []
    path = values.get("targets_file")
    if path is not None:
        targets += read_targets_file(Path(str(path)))
    return targets


def read_targets_file(path: Path) -> list[str]:
    """One target per line; blank lines and ``#`` comments are skipped. A line of two
    words, or one that reads as an option, is refused (one line naming it)."""
    try:
        if path.stat().st_size > MAX_TARGETS_FILE_BYTES:
            raise UserError(f"--targets-file {path}: larger than a file of targets can be "
                            f"({MAX_TARGETS_FILE_BYTES:,} bytes)")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot read --targets-file {path}: {why}") from None
    targets = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].split("\t#")[0].strip()
        if not line or line.startswith("#"):
            continue
        where = f"--targets-file {path} line {number}"
        if len(line.split()) != 1:
            raise UserError(f"{where}: {line!r} is not one target: give one per line")
        if line.startswith("-") or "\0" in line:
            raise UserError(f"{where}: {line!r} is not a target (a path, one per line)")
        targets.append(line)
    if not targets:
        raise UserError(f"--targets-file {path} names no target")
    return targets


# -- ssdlab run SUITE with several targets ----------------------------------------------


def run_set(suite: Suite, targets: list[str], args: argparse.Namespace, argv: list[str]
            ) -> int:
    """Check every target (one refused refuses the set), then dry-run or run the set."""
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.plan.planned import longest
    from ssdlab.run.prepare import TargetRequest
    from ssdlab.run.set_run import (
        SetRun,
        describe_set,
        prepare_all,
        set_requests,
        short_names,
    )
    values = vars(args)
    if values.get("dir") is not None:
        raise UserError("several targets run as a set take --target (or --targets-file) "
                        "only, not --dir")
    size = values.get("size")
    base = TargetRequest(None, None, size if isinstance(size, int) else None,
                         values.get("destroy_data", False), values["fio"],
                         store=values.get("store"))
    runner = suite.runner()
    suite_args = suite.spec.args(values)
    requests = set_requests(targets, base)
    prepared = prepare_all([functools.partial(runner.prepare, r, suite_args)
                            for r in requests], [r.target or "" for r in requests])
    names = short_names(targets)
    if values.get("dry_run"):
        sys.stdout.write(describe_set(names, targets, [runner.dry_run(p) for p in prepared]))
        if runner.planned is not None:
            whole = longest(runner.planned(p) for p in prepared)
            print(f"{whole.text()} (the runs go at once: the longest of them)")
        return int(ExitCode.OK)

    def go(p: object) -> Any:
        def start(store: Store, executor: Executor, progress: Progress) -> str:
            return runner.start(p, store, executor, progress).execute(argv)
        return start

    members = set_members(names, targets, prepared, [runner.progress(p) for p in prepared],
                       [go(p) for p in prepared])
    executor = FioExecutor(values["fio"],
                           read_only=any(runner.read_only(p) for p in prepared))
    outcome = SetRun(members, store_path(args), executor, labels=run_labels(args),
                     host=set_host(prepared)).execute(suite.name, argv)
    return report(suite, outcome)


def set_members(names: list[str], targets: list[str], prepared: list[Any],
             progress: list[Progress], go: list[Any], run_ids: list[str] | None = None
             ) -> list[SetMember]:
    from ssdlab.run.set_run import SetMember, info_of
    ids: list[str | None] = list(run_ids) if run_ids is not None else [None] * len(names)
    return [SetMember(n, t, info_of(p), pr, g, r) for n, t, p, pr, g, r
            in zip(names, targets, prepared, progress, go, ids, strict=True)]


def set_host(prepared: list[Any]) -> dict[str, object]:
    from ssdlab.run.prepare import PreparedTarget
    target = getattr(prepared[0], "target", None) if prepared else None
    if isinstance(target, PreparedTarget):
        return dict(target.host)
    from ssdlab.targets.identity import host_info
    return host_info()


def report(suite: Suite, outcome: SetOutcome) -> int:
    """Print each run's outcome, prefixed with its target's name; the set's exit status is
    the worst of its runs' (one line naming each run that did not end well)."""
    from ssdlab.run.set_run import worst
    from ssdlab.store.db import Store
    pages = suite.pages()
    failures: list[str] = []
    with Store.open(outcome.store_path) as store:
        for o in outcome.members:
            prefix = f"{o.member.name}: "
            run = store.load(o.run_id) if o.run_id is not None else None
            if o.error is None and run is not None:
                ended = pages.outcome(run, store.path)
                for line in ended.lines:
                    print(prefix + line)
                if ended.failure is not None:
                    failures.append(prefix + ended.failure)
                continue
            failures.append(prefix + _error_line(o.error, run))
            print(prefix + f"run {o.run_id or '(not recorded)'} "
                  f"{run.status_text if run is not None else 'did not start'}")
    print(f"set {outcome.set_id}: {len(outcome.members)} runs, {outcome.fio_runs} fio runs "
          f"shared; see them: {command()} show {outcome.set_id}    report: {command()} report "
          f"{outcome.set_id} -o DIR")
    code = max(worst(outcome), int(ExitCode.FAILURE) if failures else int(ExitCode.OK))
    if outcome.interrupted:
        raise UserError(f"set {outcome.set_id} interrupted; completed rounds are kept in "
                        f"{outcome.store_path} (continue it with `{command()} resume "
                        f"{outcome.set_id}`)", ExitCode.INTERRUPTED)
    if failures:
        raise UserError(f"set {outcome.set_id}: {len(failures)} of {len(outcome.members)} "
                        f"runs did not end well: {'; '.join(failures)}", ExitCode(code))
    return int(ExitCode.OK)


def _error_line(error: BaseException | None, run: RunData | None) -> str:
    """A run's error, in one line; a bug's traceback goes to stderr as well."""
    if error is None:
        return f"run {run.run_id if run else '-'} {run.status_text if run else 'missing'}"
    if isinstance(error, UserError):
        return error.message.splitlines()[0] if error.message else type(error).__name__
    traceback.print_exception(error, file=sys.stderr)
    return f"{type(error).__name__}: {error}".splitlines()[0]


# -- ssdlab show SET -----------------------------------------------------------------


def show_set(store: Store, set_id: str) -> str:
    from ssdlab.report.terminal import render_set
    data = store.load_set(set_id)
    return render_set(data, {run_id: store.load(run_id) for _, run_id in data.runs})
