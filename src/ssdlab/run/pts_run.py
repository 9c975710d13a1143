"""Execute a prepared PTS run: purge, precondition, rounds to steady state, journal.

Every round is committed to the store the moment it finishes, so a run stopped at
round 7 (Ctrl-C, crash, power loss) keeps rounds 1-6.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ssdlab.analysis.predict import LABEL, RunPrediction, predict_run
from ssdlab.analysis.steady import Verdict, evaluate, rule_by_name
from ssdlab.engine.aggregate import by_host
from ssdlab.engine.model import JobResult
from ssdlab.engine.runner import Executor, FioRun
from ssdlab.errors import UserError, command
from ssdlab.plan import pts as plan
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.pts import (
    PredictedVariable,
    PtsArgs,
    PtsOptions,
    PtsParams,
    PtsPrediction,
    PtsResult,
    build_options,
    build_pts_tests,
    parse_tests,
    skipped_records,
)
from ssdlab.plan.results import (
    FioCell,
    HostPart,
    HostRoundEvent,
    HostVerdictsEvent,
    ResumedAfter,
    SteadyVerdict,
    StoredPlan,
)
from ssdlab.plan.rounds import RoundTest, TrackingVar
from ssdlab.plan.specs import CellSpec, Pattern
from ssdlab.run.cells import Cell, cell_from_job, cell_records, tracking_value, window_cells
from ssdlab.run.hosts import HOST_ROUND_KIND, HOST_VERDICT_KIND, host_series
from ssdlab.run.peak_load import AUTO, peak_load
from ssdlab.run.prepare import (
    TargetRequest,
    check_file_purge,
    checked_range,
    engine_for,
    prepare_device,
    prepare_resume_target,
)
from ssdlab.run.progress import Progress, rounds_planned
from ssdlab.run.session import RunInterrupted, SessionRun, TestFailed
from ssdlab.run.suite import PreparedSuite, Runner, dry_run, rounds_progress
from ssdlab.store.db import Store
from ssdlab.store.records import RoundData, RunData, TestData, TestState
from ssdlab.targets.identity import TargetInfo
from ssdlab.units import format_bytes

#: a test with one of these statuses is not run again when a run is resumed ("predicted"
#: is not one: resuming a --predict run continues its predicted tests to the SNIA rule)
FINISHED_TESTS = ("steady", "not_steady", "failed", "skipped")
#: a test --predict stopped at a predicted steady state (never a SNIA steady state)
PREDICTED = "predicted"

__all__ = ["RUNNER", "PreparedPts", "PtsRun", "RunInterrupted", "TestFailed", "prepare_pts"]


# -- preparing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedPts(PreparedSuite[PtsOptions]):
    """A PTS run checked: the target, the options, every test's cells."""

    tests: tuple[RoundTest, ...]

    @property
    def info(self) -> TargetInfo:
        return self.target.info

    def job_text(self, cells: tuple[CellSpec, ...], what: str,
                 extra: tuple[tuple[str, str], ...] = ()) -> str:
        """As every suite's, and saying so where fio refuses writes."""
        if self.options.read_only_target:
            what += "\nread-only: fio runs with --readonly and refuses any write or trim"
        return super().job_text(cells, what, extra)


def _check_slices(tests: tuple[RoundTest, ...]) -> None:
    """Sequential threads each get their own slice; each slice must hold a block."""
    for test in tests:
        for cell in test.round_cells:
            if (
                cell.pattern is Pattern.SEQUENTIAL
                and cell.size_bytes // cell.threads < cell.block_bytes
            ):
                raise UserError(
                    f"--threads {cell.threads} is too many for {test.name}: each thread needs "
                    f"its own {format_bytes(cell.block_bytes)} slice of the "
                    f"{format_bytes(cell.size_bytes)} active range"
                )


@dataclass(frozen=True)
class AutoLoad:
    """The options ``--threads auto``/``--qd auto`` set beyond the arguments: the
    throughput tests' load and where the loads came from (None, "": not set)."""

    throughput_threads: int | None = None
    throughput_iodepth: int | None = None
    load_source: str = ""


def auto_load(request: TargetRequest, args: PtsArgs) -> tuple[PtsArgs, AutoLoad]:
    """``--threads auto``/``--qd auto``: the arguments with the IOPS load of the target's
    most recent peak run, and the options it sets beyond them (the throughput tests' load
    and where it came from); UserError (exit 2) without such a run."""
    auto_t, auto_q = args.threads == AUTO, args.iodepth == AUTO
    if not (auto_t or auto_q):
        return args, AutoLoad()
    option = "--threads" if auto_t else "--qd"
    target, tests = request.device(), parse_tests(args.tests)
    iops = peak_load(target, request.store, "iops", option)
    args = dataclasses.replace(args, threads=iops.threads if auto_t else args.threads,
                               iodepth=iops.iodepth if auto_q else args.iodepth)
    if "throughput" not in tests:
        return args, AutoLoad(load_source=iops.text)
    tp = peak_load(target, request.store, "throughput", option)
    return args, AutoLoad(tp.threads if auto_t else None, tp.iodepth if auto_q else None,
                          f"{iops.text}; {tp.text}")


def prepare_pts(request: TargetRequest, args: PtsArgs) -> PreparedPts:
    """Validate the whole run. Raises UserError (one line) before any I/O to the target."""
    args, auto = auto_load(request, args)
    base = prepare_device(request, read_only=args.read_only)
    info = base.info
    options = dataclasses.replace(
        engine_for(info, build_options(args, info.device_class, base.cpus)),
        throughput_threads=auto.throughput_threads, throughput_iodepth=auto.throughput_iodepth,
        load_source=auto.load_source)
    check_file_purge(info, options.purge)
    checked_range(info, options.active_range_pct)
    tests = build_pts_tests(options, info.capacity_bytes, info.logical_sector_bytes)
    _check_slices(tests)
    return PreparedPts(base, options, tests)


def _options_from(stored: dict[str, object]) -> PtsOptions:
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()
              if k != "quick"}
    return PtsOptions(**values)  # type: ignore[arg-type]


def prepare_pts_resume(run: RunData, request: TargetRequest) -> PreparedPts:
    """A stored PTS run's plan, re-validated against the target as it is now."""
    stored = run.plan.get("options")
    if not isinstance(stored, dict):
        raise UserError(f"run {run.run_id} has no stored PTS options to resume from")
    base = prepare_resume_target(run, request.destroy_data, request.fio,
                                 read_only=stored.get("read_only_target") is True)
    try:
        options = _options_from(stored)
    except TypeError as exc:
        raise UserError(f"run {run.run_id} was made by another ssdlab version and cannot be "
                        f"resumed by this one ({exc})") from None
    tests = build_pts_tests(options, base.info.capacity_bytes, base.info.logical_sector_bytes)
    return PreparedPts(base, options, tests)


def describe(prepared: PreparedPts) -> str:
    """``--dry-run``: the plan and every fio job file, with nothing touched."""
    opts = prepared.options
    return dry_run(prepared, [plan.describe_settings(opts)],
                   plan.describe_tests(opts, prepared.tests, prepared.info.kind == "file",
                                       prepared.job_text))


def planned(prepared: PreparedPts) -> PlannedTime:
    """Every test's rounds, from its steady-state window to its most rounds, plus its
    purge and preconditioning (the drive's own time)."""
    o = prepared.options
    return rounds_planned(prepared.tests, rule_by_name(o.rule).window, o.max_rounds,
                          purge=o.purge != "none",
                          decides="steady state or its prediction" if o.predict else "")


# -- running --------------------------------------------------------------------------------


def _verdicts(test: RoundTest, rounds: list[dict[str, float]], rule_name: str
              ) -> dict[str, Verdict]:
    rule = rule_by_name(rule_name)
    out: dict[str, Verdict] = {}
    for set_name, variables in test.tracking_sets:
        series = {v.name: [r[v.name] for r in rounds] for v in variables}
        out[set_name] = evaluate(series, rule)
    return out


def _tracking(variables: list[TrackingVar], cells: list[Cell]) -> dict[str, float]:
    return {v.name: tracking_value(cells, v.cell, v.metric) for v in variables}


def _predict(test: RoundTest, rounds: list[dict[str, float]], options: PtsOptions
             ) -> RunPrediction:
    """``--predict``: the steady state of the test's stopping variables, predicted."""
    series = {v.name: [r[v.name] for r in rounds] for v in test.tracking()}
    return predict_run(series, rule_by_name(options.rule), options.max_rounds)


def prediction_record(found: RunPrediction) -> PtsPrediction:
    """The stored form of a prediction, labelled as not a SNIA steady state."""
    return PtsPrediction(
        label=LABEL, rule=found.rule, rounds_seen=found.rounds_seen,
        window_rounds=list(found.window_rounds or ()), message=found.message,
        variables=[PredictedVariable(
            variable=p.variable, model=p.model, value=p.value, half_width=p.half_width,
            half_width_pct=p.half_width_pct, plateau=p.plateau, rate=p.rate, known=p.known,
            why=p.why) for p in found.predictions])


class PtsRun(SessionRun[PreparedPts]):
    """One PTS run against one target, journaled to ``store``. Resuming: finished tests
    stay, the current one goes on from its last completed round (no new purge or
    preconditioning), the rest run as planned."""

    suite = "pts"

    def __init__(
        self, prepared: PreparedPts, store: Store, executor: Executor, progress: Progress
    ) -> None:
        super().__init__(prepared, store, executor, progress)
        #: on several hosts: each test's host-round events (stored ones too, on resume)
        self.host_rounds: dict[str, list[HostRoundEvent]] = {}
        #: tests --predict stopped, resumed: they go on to the SNIA rule, not predicted
        #: again; their prediction stays in their result beside the SNIA verdict
        self.to_snia: dict[str, PtsPrediction | None] = {}

    def plan_record(self) -> StoredPlan:
        return plan.plan_record(self.p.options, self.p.tests)

    def run_tests(self, previous: RunData | None) -> list[str]:
        for event in previous.events if previous is not None else ():  # resumed
            if event.kind == HOST_ROUND_KIND and event.test and event.detail:
                self.host_rounds.setdefault(event.test, []).append(
                    HostRoundEvent.from_json(event.detail, f"host-round event of {event.test}"))
        stored = {t.name: t for t in previous.tests} if previous is not None else {}
        self.progress.start(  # resumed: the ETA is what is left, not the whole run's
            self.p.tests,
            finished=[n for n, t in stored.items() if t.status in FINISHED_TESTS],
            rounds_done={n: sum(r.status == "ok" for r in t.rounds) for n, t in stored.items()})
        failed: list[str] = []
        for test in self.p.tests:
            before = stored.get(test.name)
            if before is not None and before.status in FINISHED_TESTS:
                if before.status == "failed":
                    failed.append(test.name)
                continue
            self.progress.test_started(test)
            try:
                self.run_test(test, before)
            except TestFailed as exc:
                failed.append(test.name)
                self.session.after_failure(test.name, exc)
        return failed

    # -- one test ----------------------------------------------------------------------
    def run_test(self, test: RoundTest, before: TestData | None = None) -> None:
        params = plan.test_params(test, self.p.options)
        earlier = PtsResult.from_json(before.result).prediction if before else None
        if before is not None and (before.status == PREDICTED or earlier is not None):
            self.to_snia[test.name] = earlier  # resumed: on to the SNIA rule, not predicted
        # a prediction made earlier stays in the result meanwhile
        self.store.set_test(self.run_id, test.name, TestState(
            "running", params, {}, self._partial(test.name)))
        previous = [r for r in before.rounds if r.status == "ok"] if before else []
        if previous:
            self.store.add_event(
                self.run_id, test.name, "warning",
                f"resumed after round {previous[-1].round_no}: the drive was idle "
                f"{time.time() - previous[-1].ended_at:,.0f} s while the run was stopped",
                ResumedAfter(previous[-1].round_no),
            )
            try:
                self._rounds(test, params, previous)
            except TestFailed as exc:
                self._failed(test, params, exc)
                raise
            return
        try:
            if test.purge and self.p.options.purge != "none":
                rng = test.round_cells[0]
                self.session.purge(test.name, self.p.options.purge, rng.offset_bytes,
                                   rng.size_bytes)
            if test.wipc is not None:
                self.session.precondition(test.name, test.wipc)
            self._rounds(test, params)
        except TestFailed as exc:
            self._failed(test, params, exc)
            raise

    def _failed(self, test: RoundTest, params: PtsParams, exc: TestFailed) -> None:
        self.store.set_test(self.run_id, test.name, TestState(
            "failed", params, {}, self._partial(test.name, error=str(exc))))

    def _partial(self, test: str, **fields: Any) -> PtsResult:
        """A running or failed test's partial result, with its earlier prediction if any."""
        earlier = self.to_snia.get(test)
        extra = {"prediction": earlier} if earlier is not None else {}
        return PtsResult.partial(**fields, **extra)

    def _round(self, test: RoundTest, round_no: int) -> tuple[FioRun, list[Cell]]:
        text = self.p.job_text(test.round_cells, f"{test.name} round {round_no}")
        self.progress.phase("round", round_no, test.round_seconds)
        run = self.session.run_fio(text, test.round_cells, json_plus=True)
        cells = _cells(test, run.output.jobs) if run.output is not None else []
        return run, cells

    def _host_parts(self, test: RoundTest, run: FioRun, variables: list[TrackingVar]
                    ) -> dict[str, HostPart] | None:
        """On several hosts: each host's cells and tracking variables of the round."""
        if not run.per_host:
            return None
        parts: dict[str, HostPart] = {}
        for host, jobs in by_host(run.per_host).items():
            cells = _cells(test, jobs)
            parts[host] = HostPart(_tracking(variables, cells),
                                   cell_records(FioCell, cells, f"{test.name} on {host}"))
        return parts

    def _rounds(
        self, test: RoundTest, params: PtsParams, previous: list[RoundData] | None = None
    ) -> None:
        variables = list({v.name: v for _, vs in test.tracking_sets for v in vs}.values())
        done = sorted((r for r in previous or [] if r.status == "ok"), key=lambda r: r.round_no)
        history: list[dict[str, float]] = [dict(r.tracking) for r in done]
        all_cells: list[list[Cell]] = [list(r.cells) for r in done]
        verdicts: dict[str, Verdict] = (
            _verdicts(test, history, self.p.options.rule) if history else {}
        )
        if verdicts and verdicts[test.primary_set].attained:  # stopped right after it settled
            self._finish_test(test, params, verdicts, all_cells)
            return
        predicting = self.p.options.predict and test.name not in self.to_snia
        found: RunPrediction | None = None
        for round_no in range(len(done) + 1, self.p.options.max_rounds + 1):
            run, cells = self._round(test, round_no)
            tracking = _tracking(variables, cells)
            complete = run.ok and len(cells) == len(test.round_cells)
            hosts = self._host_parts(test, run, variables) if complete else None
            self.session.fio_round(test.name, round_no, run, "round",
                                   status="ok" if complete else "failed", tracking=tracking,
                                   cells=cell_records(FioCell, cells, test.name), hosts=hosts)
            if hosts is not None:
                self.host_rounds.setdefault(test.name, []).append(
                    HostRoundEvent(round_no, "round", hosts))
            self.session.ground_truth(test.name, f"round {round_no}")
            if not complete:
                raise TestFailed(f"round {round_no}: {run.error or 'fio reported fewer cells'}")
            history.append(tracking)
            all_cells.append(cells)
            verdicts = _verdicts(test, history, self.p.options.rule)
            primary = verdicts[test.primary_set]
            found = _predict(test, history, self.p.options) if (
                predicting and not primary.attained) else None
            self.progress.round_done(
                round_no, {k: tracking[k] for k in primary.variables},
                primary.message + (f"; {found.message}" if found is not None else ""),
            )
            if primary.attained or (found is not None and found.known):
                break
        if not verdicts:
            raise TestFailed("no round completed")
        self._finish_test(test, params, verdicts, all_cells,
                          found if found is not None and found.known else None)

    def _finish_test(
        self,
        test: RoundTest,
        params: PtsParams,
        verdicts: dict[str, Verdict],
        all_cells: list[list[Cell]],
        predicted: RunPrediction | None = None,
    ) -> None:
        """Store the test's SNIA verdicts and result; a prediction (``--predict``) beside
        them, never instead: the SNIA verdict of a predicted test stays "not steady"."""
        primary = verdicts[test.primary_set]
        window = primary.window_rounds if primary.attained else None
        if window is None:  # SNIA: report the last window's rounds, marked not steady
            size = rule_by_name(self.p.options.rule).window
            window = (max(1, len(all_cells) - size + 1), len(all_cells))
        result = PtsResult(
            steady=primary.attained,
            window_rounds=list(window),
            rounds_run=len(all_cells),
            tracking_set=test.primary_set,
            cells=window_cells(all_cells[window[0] - 1 : window[1]]),
            skipped=skipped_records(test),
            prediction=prediction_record(predicted) if predicted is not None
            else self.to_snia.get(test.name),
        )
        status = "steady" if primary.attained else "not_steady"
        if predicted is not None and not primary.attained:
            status = PREDICTED
        stored = {"primary": SteadyVerdict.of(primary)}
        stored.update({name: SteadyVerdict.of(v) for name, v in verdicts.items()})
        self.store.set_test(self.run_id, test.name, TestState(status, params, stored, result))
        self.progress.line(f"{test.name}: {primary.message}")
        if predicted is not None:
            self.progress.line(f"{test.name}: {predicted.message} (continue to the SNIA rule "
                               f"with `{command()} resume {self.run_id}`)")
        self._host_verdicts(test)

    def _host_verdicts(self, test: RoundTest) -> None:
        """On several hosts: each host's steady state, judged by the run's rule on its own
        tracking variables (the run's verdict is the aggregate's)."""
        events = self.host_rounds.get(test.name)
        if not events:
            return
        names = [v.name for _, vs in test.tracking_sets for v in vs]
        verdicts: dict[str, SteadyVerdict] = {}
        for host, rounds in sorted(host_series(events, names).items()):
            verdict = _verdicts(test, rounds, self.p.options.rule)[test.primary_set]
            verdicts[host] = SteadyVerdict.of(verdict)
            self.progress.line(f"{test.name} on {host}: {verdict.message}")
        self.store.add_event(self.run_id, test.name, HOST_VERDICT_KIND,
                             f"{test.name}: each host's own steady state",
                             HostVerdictsEvent(verdicts))


def _cells(test: RoundTest, jobs: Sequence[JobResult]) -> list[Cell]:
    by_name = {job.name: job for job in jobs}
    return [cell_from_job(spec, by_name[spec.name]) for spec in test.round_cells
            if spec.name in by_name]


RUNNER = Runner(
    prepare=prepare_pts,
    describe=describe,
    progress=rounds_progress,
    start=PtsRun,
    prepare_resume=prepare_pts_resume,
    read_only=lambda p: p.options.read_only_target,
    planned=planned,
)
