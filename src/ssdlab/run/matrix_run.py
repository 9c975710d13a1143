"""The RAID matrix's run (issue 15, item 5): check every member, then for each level build
the array, run the chosen suite on it, tear it down, next.

It runs other suites without importing the registry: the registry hands it a lookup of
the suites (:func:`make_runner`), and it runs the chosen one as the command line does.
The matrix is a run of its own in the store (suite ``matrix``), on the shared skeleton
(:class:`~ssdlab.run.session.SessionRun`: its target is the set of members, which it
does not hold, sample or read the health of as the skeleton would); each level is one
of its tests, whose result names the level's own run and copies what the level
comparison needs from it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ssdlab.analysis.endurance import written_between
from ssdlab.analysis.member_rounds import level_slow, md_small_write, method_from_reads
from ssdlab.engine.runner import FioExecutor
from ssdlab.errors import TargetError, UserError, command
from ssdlab.plan.array import ArrayPlan, create_commands, destroy_commands, plan_array
from ssdlab.plan.matrix import (
    MEMBER_CHECK,
    SUITE,
    LevelParams,
    LevelResult,
    MatrixArgs,
    MatrixOptions,
    MatrixPlan,
    MemberCheckParams,
    MemberCheckResult,
    MemberCheckRow,
    MemberRoundRow,
    MemberWritten,
    validate,
)
from ssdlab.plan.member_rounds import member_rounds, summarise
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.results import plan_head
from ssdlab.plan.suite import SuiteSpec, TargetKind
from ssdlab.run import array as arrays
from ssdlab.run.consistency import record_checks
from ssdlab.run.matrix_rows import level_rows
from ssdlab.run.member_check import judge_members, member_check_job, planned_seconds
from ssdlab.run.prepare import (
    PreparedTarget,
    TargetRequest,
    checked_versions,
    planned_device,
    stored_args,
)
from ssdlab.run.progress import Progress
from ssdlab.run.session import Observed, RunInterrupted, SessionRun
from ssdlab.run.suite import ChildSuite, PreparedSuite, Runner, SuiteLookup
from ssdlab.run.zfs import Counts, level_counts, level_figures
from ssdlab.store.records import RunData, TestState
from ssdlab.targets.health import HealthReading, read_health
from ssdlab.targets.identity import TargetInfo, host_info
from ssdlab.targets.nbd import is_nbd_target
from ssdlab.targets.safety import DestroyData

#: a file-backed array's test file takes this share of the usable space, in whole MiB
FILE_SHARE = 0.8
MIB = 1024 * 1024


@dataclass(frozen=True)
class PreparedMatrix(PreparedSuite[MatrixOptions]):
    """Every check done: the options, the members (the run's target: their set), one plan
    per level, the child suite."""

    args: MatrixArgs
    members: tuple[TargetInfo, ...]
    held: tuple[str, ...]  # members held by a leftover array of ssdlab's (torn down first)
    destroy_data: DestroyData
    fio: str
    plans: tuple[ArrayPlan, ...]
    #: the suite each level runs (the registry's, through the lookup the registry gave)
    child: ChildSuite

    @property
    def member_paths(self) -> list[str]:
        return [m.path for m in self.members]


def _child_suite(name: str, lookup: SuiteLookup) -> ChildSuite:
    suite = lookup(name)
    if suite is None or not suite.spec.runnable or name == SUITE:
        raise UserError(f"--suite {name!r} is not a suite a matrix can run "
                        f"(see `{command()} run --help`)")
    if suite.spec.target not in (TargetKind.DEVICE, TargetKind.DEVICE_OR_DIR, TargetKind.DIR):
        raise UserError(f"--suite {name}: it does not run on one target")
    return suite


def _held_by_leftovers(paths: list[str]) -> dict[str, str]:
    """Member path -> the leftover array (of a killed run) that holds it."""
    held = {}
    for state in arrays.load_states():
        if state.leftover():
            for m in state.plan.members:
                held[os.path.realpath(m)] = state.plan.name
    return {p: held[os.path.realpath(p)] for p in paths if os.path.realpath(p) in held}


def prepare(request: TargetRequest, args: MatrixArgs, lookup: SuiteLookup) -> PreparedMatrix:
    """Every check before anything is written: options, the child suite and its options,
    fio, each member through every guardrail (members a killed run's array holds are
    checked again once it is torn down), each level's plan."""
    o = validate(args)
    child = _child_suite(o.suite, lookup)
    child.spec.parse_argv([*o.suite_argv, *_placeholder_target(child.spec)],
                          "--suite-options")
    versions = checked_versions(request.fio)
    paths = [m if is_nbd_target(m) else os.path.abspath(m) for m in o.members]
    held = _held_by_leftovers(paths)
    infos = arrays.identify_members(paths)
    free = [i for i in infos if i.path not in held]
    if free:
        arrays.guard_members(free, request.destroy_data)
    member_bytes = min(i.capacity_bytes for i in infos)
    plans = tuple(plan_array(o.backend, level, paths, name=o.array_name(level),
                             member_bytes=member_bytes,
                             mount_dir=arrays.default_mount_dir(o.array_name(level)),
                             chunk_bytes=o.chunk_bytes) for level in o.levels)
    target = PreparedTarget(_set_info(infos), False, host_info(), versions)
    return PreparedMatrix(target, o, args, tuple(infos), tuple(held), request.destroy_data,
                          request.fio, plans, child)


def _set_info(members: list[TargetInfo]) -> TargetInfo:
    """The members as one target: the run's (see :func:`_target_dict`)."""
    models = {m.model for m in members}
    return TargetInfo(path=",".join(m.path for m in members), kind="set",
                      name=f"{len(members)} members", device_class="set",
                      model=models.pop() if len(models) == 1 else None, serial=None,
                      firmware=None, capacity_bytes=sum(m.capacity_bytes for m in members),
                      logical_sector_bytes=512, physical_sector_bytes=512, rotational=None,
                      numa_node=None, scheduler=None, discard_max_bytes=None,
                      details={"members": [arrays.member_identity(m) for m in members]})


def _placeholder_target(spec: SuiteSpec[Any]) -> list[str]:
    return ["--dir", "/"] if spec.target is TargetKind.DIR else ["--target", "/dev/null"]


def prepare_resume(run: RunData, request: TargetRequest, lookup: SuiteLookup
                   ) -> PreparedMatrix:
    """A stopped matrix prepared again: the same members (serial and size)."""
    args = stored_args(run, MatrixArgs)
    p = prepare(TargetRequest(None, None, None, request.destroy_data, request.fio), args,
                lookup)
    then = run.target.get("members")
    if isinstance(then, list):
        for old, info in zip(then, p.members, strict=False):
            if isinstance(old, dict) and (old.get("serial"), old.get("capacity_bytes")) != (
                    info.serial, info.capacity_bytes):
                raise TargetError(f"refusing to resume matrix {run.run_id}: member {info.path} "
                                  "is not the same drive (serial or size changed)")
    return p


# -- the child suite on one level ---------------------------------------------------------


def child_argv(p: PreparedMatrix, plan: ArrayPlan, free_bytes: int | None = None
               ) -> list[str]:
    """``ssdlab run SUITE ...`` as the matrix runs it on ``plan``'s array (``free_bytes``:
    what the built file system has free, which bounds its test file)."""
    spec = p.child.spec
    words = list(p.options.suite_argv)
    if spec.target is TargetKind.DIR:
        target = ["--dir", plan.mount_dir]
    else:
        target = ["--target", plan.target]
        if plan.backend != "btrfs":
            target.append(f"--destroy-data={plan.target}")
        elif spec.target is TargetKind.DEVICE and not _has(words, "--size"):
            target += ["--size", str(file_bytes(plan, free_bytes))]
    return ["ssdlab", "run", spec.name, *target, *words]


def file_bytes(plan: ArrayPlan, free_bytes: int | None = None) -> int:
    """The test file on a file-backed array: 80 % of the usable space (of what the file
    system has free, once built: its metadata takes some), whole MiB."""
    room = plan.usable_bytes if free_bytes is None else min(plan.usable_bytes, free_bytes)
    return max(MIB, int(room * FILE_SHARE) // MIB * MIB)


def planned_bytes(plan: ArrayPlan) -> int:
    """What a block target will offer before it is built: the zvol's estimated size
    (:meth:`ArrayPlan.zvol_bytes`), or the md array's usable size (md keeps a little
    of each member for its superblock and bitmap: the built array is read again)."""
    return plan.zvol_bytes() if plan.backend == "zfs" else plan.usable_bytes


def free_space(plan: ArrayPlan) -> int | None:
    """What a built file-backed array has free (None for block targets)."""
    if plan.backend != "btrfs":
        return None
    st = os.statvfs(plan.mount_dir)
    return st.f_bavail * st.f_frsize


def _has(words: list[str], flag: str) -> bool:
    return any(w == flag or w.startswith(flag + "=") for w in words)


def _child_request(p: PreparedMatrix, argv: list[str]) -> tuple[TargetRequest, object]:
    values = p.child.spec.option_values(argv[3:], "--suite-options")
    size = values.get("size")
    targets = values.get("target") or [None]  # --target may be repeated; here it is once
    request = TargetRequest(targets[-1], values.get("dir"),
                            size if isinstance(size, int) else None,
                            values.get("destroy_data", False), p.fio)
    return request, p.child.spec.args(values)


# -- dry run ----------------------------------------------------------------------------


def describe(p: PreparedMatrix) -> str:
    o = p.options
    lines = [f"DRY RUN: nothing will be written. Matrix of {p.child.name} on "
             f"{', '.join(lv.removeprefix('raid') for lv in o.levels)} "
             f"({o.backend}) over {len(p.members)} members:"]
    lines += [f"  {m.path}: {m.model or '-'} serial {m.serial or '-'}, "
              f"{m.capacity_bytes:,} bytes" for m in p.members]
    lines += [f"  {path} is held by array {name}, left by a killed run: it is torn down "
              "first" for path, name in _held_by_leftovers(p.member_paths).items()]
    if o.member_check_seconds > 0:
        lines += ["member check (read-only) job:",
                  member_check_job(p.member_paths, o.member_check_seconds)]
    for plan in p.plans:
        lines += [f"level {plan.level_name}: {plan.describe()}",
                  *(f"  $ {' '.join(c)}" for c in create_commands(plan)),
                  f"  $ {' '.join(child_argv(p, plan))}",
                  str(_child_dry_run(p, plan)),
                  *(f"  $ {' '.join(c)}" for c in destroy_commands(plan))]
    return "\n".join(lines) + "\n"


def planned(p: PreparedMatrix) -> PlannedTime:
    """The member check (up to twice: a suspect's figures are measured again), then each
    level's suite (its own planned time, from its dry run on a stand-in of the array) and
    the building and tearing down of each array."""
    o = p.options
    check = (planned_seconds(len(p.members), o.member_check_seconds)
             if o.member_check_seconds > 0 else 0.0)
    # a suspect's figures are measured again, every member alike: at most as long again
    out = PlannedTime(check, 2 * check, "whether a member is measured again") if check else \
        PlannedTime.fixed(0.0)
    for plan in p.plans:
        child = _child_dry_run(p, plan, planned_only=True)
        out += child if isinstance(child, PlannedTime) else PlannedTime.step(
            f"the {p.child.name} suite on level {plan.level}")
    return out + PlannedTime.step("building and tearing down each array")


def _child_dry_run(p: PreparedMatrix, plan: ArrayPlan, planned_only: bool = False
                   ) -> str | PlannedTime | None:
    """The child's own dry run (its job files; with ``planned_only``, its planned time,
    None when it cannot be told): on the md array or zvol as it will be (its size
    estimated), or, for a suite in a directory of the array's file system, in a temporary
    directory standing in for it, with the array's path put back."""
    runner = p.child.runner()
    stand_in = tempfile.mkdtemp(prefix="ssdlab-dry-")
    try:
        real = _target_root(plan, p.child.spec.target)
        argv = child_argv(p, plan)
        words = [w.replace(plan.mount_dir, stand_in) for w in argv]
        request, args = _child_request(p, words)
        if real == plan.target and plan.backend != "btrfs":
            request = dataclasses.replace(request, planned=planned_device(
                plan.target, planned_bytes(plan), {"array": plan.name}))
        prepared = runner.prepare(request, args)
        if planned_only:
            return runner.planned(prepared) if runner.planned is not None else None
        text = runner.dry_run(prepared)
        return text.replace(stand_in, plan.mount_dir).rstrip("\n")
    except UserError as err:
        if planned_only:
            return None
        return f"  ({p.child.name} cannot show its job files before the array exists: {err})"
    finally:
        shutil.rmtree(stand_in, ignore_errors=True)


# -- the run ------------------------------------------------------------------------------


def _target_dict(p: PreparedMatrix) -> dict[str, object]:
    models = {m.model for m in p.members}
    return {
        "path": ",".join(p.member_paths), "kind": "set", "name": f"{len(p.members)} members",
        "device_class": "set", "model": models.pop() if len(models) == 1 else None,
        "serial": None, "firmware": None,
        "capacity_bytes": sum(m.capacity_bytes for m in p.members),
        "members": [arrays.member_identity(m) for m in p.members],
    }


class MatrixRun(SessionRun[PreparedMatrix]):
    """One matrix in the store; its levels run one after another."""

    suite = SUITE
    holds_target = False  # each level's suite holds its array
    observed = Observed(members=False, drive=False)  # each level's run does, on its array

    def say(self, line: str) -> None:
        self.progress.line(line)

    # -- the skeleton's hooks ---------------------------------------------------------
    def plan_record(self) -> MatrixPlan:
        return MatrixPlan(SUITE, *plan_head(self.p.args, self.p.options),
                          tuple(pl.describe() for pl in self.p.plans))

    def target_record(self) -> Mapping[str, object]:
        return _target_dict(self.p)

    def before_open(self) -> None:
        arrays.check_backend(self.p.options.backend)  # no kernel support: refused first
        arrays.clean_leftovers(say=self.say)

    def announce(self, resumed: bool) -> None:
        if resumed:
            self.say(f"resuming matrix {self.run_id}")
            return
        self.say(f"matrix {self.run_id}: {self.p.child.name} on "
                 f"{', '.join(pl.level_name for pl in self.p.plans)} "
                 f"(results in {self.store.path})")

    def interrupted_text(self) -> str:
        return (f"matrix {self.run_id} interrupted; completed levels are kept "
                f"(continue it with `{command()} resume {self.run_id}`)")

    def run_tests(self, previous: RunData | None) -> list[str]:
        """The member check, then each level not measured before; the levels that failed."""
        done = {t.name: t for t in previous.tests} if previous else {}
        failed: list[str] = []
        arrays.checked_members(self.p.member_paths, self.p.destroy_data)
        if self.p.options.member_check_seconds > 0 and (
                MEMBER_CHECK not in done or done[MEMBER_CHECK].status != "complete"):
            self._member_check()
        for plan in self.p.plans:
            test = done.get(plan.level)
            if test is not None and test.status in ("complete", "failed"):
                self.say(f"{plan.level_name}: measured before, not run again")
                failed += [plan.level] if test.status == "failed" else []
                continue
            resume_from = self._stopped_child(plan, test) if test else None
            if not self._level(plan, resume_from):
                failed.append(plan.level)
        return failed

    def finish(self, failed: list[str]) -> None:
        message = f"{len(failed)} level(s) failed: {', '.join(failed)}" if failed else ""
        record_checks(self.store, self.run_id)
        self.store.finish_run(self.run_id, "complete", message)

    def _member_check(self) -> None:
        seconds = self.p.options.member_check_seconds
        self.say(f"member check: {seconds:g} s sequential and 4 KiB random reads per member "
                 "(read-only)")
        executor = self.executor
        if isinstance(executor, FioExecutor):  # fio itself refuses any write (--readonly)
            executor = FioExecutor(executor.fio, read_only=True)
        check = judge_members(self.p.member_paths, executor, seconds=seconds, progress=self.say)
        verdict = check.verdict
        rows = [MemberCheckRow(r.name, r.seq_read_mb_s, r.rand_read_iops, r.name in
                               verdict.outliers, *check.again_of(r.name),
                               True if r.name in verdict.unconfirmed else None)
                for r in check.results]
        result = MemberCheckResult(rows, [*verdict.outliers], verdict.message, [
            *verdict.unconfirmed] or None)
        self.store.set_test(self.run_id, MEMBER_CHECK, TestState(
            "complete", MemberCheckParams(seconds), {"outliers": list(verdict.outliers)},
            result))
        self.say(verdict.message)  # a sentence that names the check itself
        if verdict.outliers:
            self.store.add_event(self.run_id, MEMBER_CHECK, "warning", verdict.message, None)

    def _stopped_child(self, plan: ArrayPlan, test: Any) -> RunData | None:
        """The level's own run a killed matrix left, if its suite can resume it."""
        run_id = self._find_child(plan, float(test.params.get("started_at", 0.0)))
        if run_id is None or not self.p.child.spec.resumable:
            return None
        run = self.store.load(run_id)
        return run if run.status != "complete" else None

    def _level(self, plan: ArrayPlan, stopped: RunData | None) -> bool:
        """Build, run, tear down; the level's result stored. True when it succeeded."""
        started = time.time()
        params = LevelParams(started, plan.describe())
        self.store.set_test(self.run_id, plan.level, TestState(
            "running", params, {}, LevelResult(plan.level, plan.backend)))
        self.say(f"== {plan.level_name}: {plan.describe()}")
        child_id: str | None = stopped.run_id if stopped else None
        error: str | None = None
        counts: Counts = {}
        before = self._health()
        try:
            members = arrays.checked_members(list(plan.members), self.p.destroy_data)
            with arrays.built(plan, members, owner=self.run_id, say=self.say) as state, \
                    level_counts(plan, state.members, self.p.child.spec.target is not
                                 TargetKind.DIR, say=self.say) as counts:
                child_id = self._run_child(plan, stopped)
                provenance = state.provenance()
        except RunInterrupted:
            raise
        except UserError as err:
            error = err.message.splitlines()[0]
            provenance = {}
            self.say(f"{plan.level_name}: FAILED: {error}")
            self.store.add_event(self.run_id, plan.level, "error", f"{plan.level_name} failed: "
                                 f"{error}", None)
            child_id = child_id or self._find_child(plan, started)
        zfs = level_figures(plan, provenance, counts)
        result = self._result(plan, child_id, provenance, error, time.time() - started, zfs)
        result = dataclasses.replace(result, written=self._written(before), zfs=zfs)
        if zfs is not None and "verdict" in zfs:
            self.say(f"{plan.level_name}: members over the level: {zfs['verdict']}")
        self.store.set_test(self.run_id, plan.level, TestState(
            "failed" if error else "complete", params, {}, result))
        return error is None

    def _health(self) -> dict[str, HealthReading | None]:
        """Each member's health-log count of bytes written (None where none is read)."""
        out: dict[str, HealthReading | None] = {}
        for m in self.p.members:
            try:
                out[m.path] = read_health(m.path, m.details)
            except (TargetError, ValueError) as err:
                self.say(f"{m.path}: its health log cannot be read ({err})")
                out[m.path] = None
        return out

    def _written(self, before: dict[str, HealthReading | None]) -> list[MemberWritten]:
        after = self._health()
        out = []
        for path, then in before.items():
            now = after.get(path)
            if then is None or now is None:
                continue
            w = written_between(then.host_bytes_written, now.host_bytes_written,
                                now.resolution_bytes, then.media_bytes_written,
                                now.media_bytes_written)
            out.append(MemberWritten(path, w.host_bytes, w.resolution_bytes, w.media_bytes))
        return out

    def _outcome(self, child: RunData) -> list[str]:
        """What ``ssdlab run`` prints at the end of the level's run (its suite's verdicts)."""
        try:
            return list(self.p.child.pages().outcome(child, self.store.path).lines)
        except (UserError, ValueError, KeyError) as err:
            return [f"(its outcome cannot be read: {err})"]

    def _run_child(self, plan: ArrayPlan, stopped: RunData | None) -> str:
        runner = self.p.child.runner()
        argv = child_argv(self.p, plan, free_space(plan))
        request, args = _child_request(self.p, argv)
        if stopped is not None and runner.prepare_resume is not None:
            self.say(f"{plan.level}: resuming its run {stopped.run_id} on the rebuilt array")
            self.store.add_event(stopped.run_id, None, "warning",
                                 "the matrix was stopped; this run continues on its array "
                                 "rebuilt from wiped members: later rounds start from fresh "
                                 "drives, not from the state the stopped rounds left", None)
            prepared = runner.prepare_resume(stopped, request)
            progress = runner.progress(prepared)
            try:
                return runner.resume(prepared, self.store, self.executor, progress, stopped,
                                     argv)
            finally:
                progress.close()
        prepared = runner.prepare(request, args)
        progress = runner.progress(prepared)
        try:
            return runner.start(prepared, self.store, self.executor, progress).execute(argv)
        finally:
            progress.close()

    def _find_child(self, plan: ArrayPlan, started: float) -> str | None:
        """The level's own run: of its suite, on its array, since the level started (the
        matrix holds the members, so there is one)."""
        for summary in self.store.list_runs():
            if (summary.suite == self.p.child.name and summary.created_at >= started
                    and summary.target_path.startswith(
                        _target_root(plan, self.p.child.spec.target))):
                return summary.run_id
        return None

    def _result(self, plan: ArrayPlan, child_id: str | None, provenance: dict[str, Any],
                error: str | None, seconds: float,
                zfs: Mapping[str, Any] | None = None) -> LevelResult:
        if child_id is None:
            return LevelResult(plan.level, plan.backend, array=provenance, seconds=seconds,
                               error=error, level_name=plan.level_name)
        child = self.store.load(child_id)
        rounds = [r for rs in member_rounds(child.events).values() for r in rs]
        summary = summarise(rounds)
        level = zfs is not None and "verdict" in zfs  # ZFS: judged over the whole level
        slow = level_slow(summary.slow, len(rounds), over_level=level,
                          verdict=(zfs or {}).get("slow_member"))
        method, how = _write_method(plan, provenance, summary.reads_per_write)
        if method is not None:
            self.say(f"{plan.level_name}: write method {how}")
        return LevelResult(
            level=plan.level, backend=plan.backend, child_run=child_id,
            child_status=child.status_text, array=provenance, rows=level_rows(child),
            write_penalty=summary.write_penalty, textbook_penalty=summary.textbook,
            imbalance=summary.max_imbalance,
            slow_member=slow.member, slow_rounds=slow.rounds, member_rounds=len(rounds),
            slow_outliers=slow.outliers or None,
            members=member_round_rows(child), outcome=self._outcome(child), seconds=seconds,
            error=error or (child.message or None if child.status != "complete" else None),
            write_method=method, write_method_note=how or None,
            reads_per_write=summary.reads_per_write, level_name=plan.level_name,
            slow_basis="level" if level else None)


def _write_method(plan: ArrayPlan, provenance: Mapping[str, Any],
                  reads_per_write: float | None) -> tuple[str | None, str]:
    """md RAID 5/6: the write method the level's member reads per host write show, and how
    it was told (:func:`ssdlab.analysis.member_rounds.method_from_reads`); (None, "")
    elsewhere."""
    md = provenance.get("md")
    if plan.backend != "md" or not isinstance(md, Mapping):
        return None, ""
    rule = md.get("rmw_level")
    expected = md_small_write(plan.level, len(plan.members),
                              rule if isinstance(rule, int) else None)
    if expected is None:
        return None, ""
    return method_from_reads(expected, reads_per_write)


def member_round_rows(run: RunData) -> list[MemberRoundRow]:
    """Each member over each measured round of ``run`` (its "members" events), in order."""
    rounds = [(test, r) for test, rs in member_rounds(run.events).items() for r in rs]
    return [MemberRoundRow(seq, test, r.round_no, p.name, p.ios / p.seconds,
                           p.read_mb_s + p.write_mb_s, p.mean_wait_ms, p.utilisation_pct)
            for seq, (test, r) in enumerate(rounds, 1) for p in r.periods()]


def _target_root(plan: ArrayPlan, kind: TargetKind) -> str:
    """Where the level's suite runs: the mount of a file-system array (btrfs, a ZFS
    dataset for a suite that runs in a directory), else the block target."""
    on_mount = plan.backend == "btrfs" or (plan.backend == "zfs" and kind is TargetKind.DIR)
    return plan.mount_dir if on_mount else plan.target


def _progress(p: PreparedMatrix) -> Progress:
    return Progress()


def make_runner(lookup: SuiteLookup) -> Runner[MatrixArgs, PreparedMatrix]:
    """The matrix's runner, running the suites ``lookup`` finds (the registry's)."""
    def prepare_with(request: TargetRequest, args: MatrixArgs) -> PreparedMatrix:
        return prepare(request, args, lookup)

    def prepare_again(run: RunData, request: TargetRequest) -> PreparedMatrix:
        return prepare_resume(run, request, lookup)

    return Runner(prepare=prepare_with, describe=describe, progress=_progress, start=MatrixRun,
                  prepare_resume=prepare_again, planned=planned)
