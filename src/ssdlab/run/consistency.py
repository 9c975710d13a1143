"""The self-consistency checks of a run, when it ends (docs/consistency.md): every fio job
of every measured round of every test, from fio's own output as stored, against Little's
law; and the target's stack (loop devices without direct I/O, fio ``direct=0``, a PCIe
link's limit) for the cache-bound verdict. One ``consistency`` event per test, its detail a
:class:`ssdlab.plan.consistency.ConsistencyChecks`.

Every suite's run ends through :func:`record_checks` (``run.session.finish_complete``), so
the checks cover every suite whatever it builds its figures from; a test without fio
output (the database suite's sysbench and pgbench) says it was not checked, and why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ssdlab.analysis.consistency import (
    EXCEEDS,
    MARKED,
    OPEN,
    TOTAL,
    Direction,
    Layer,
    LittleVerdict,
    cache_bound,
    closed_loop,
    is_sync,
    little,
    over_limit,
    pcie_limit_bytes_per_s,
    queue_depth,
)
from ssdlab.engine.model import JobResult
from ssdlab.engine.parser import parse_fio_output
from ssdlab.errors import UserError
from ssdlab.plan.consistency import (
    EVENT_KIND,
    CacheCheck,
    CellCheck,
    ConsistencyChecks,
    checks_of,
    summary,
)
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, TestData
from ssdlab.targets.identity import SYSFS, block_dir, read_attr
from ssdlab.targets.members import members_of_target
from ssdlab.targets.topology import pci_attachment

_BUFFERED = re.compile(r"^\s*direct\s*=\s*0\s*$", re.MULTILINE)
_SEVERITY = {EXCEEDS: 3, TOTAL: 2, OPEN: 1}


def job_verdict(job: JobResult) -> LittleVerdict | None:
    """Little's law on one fio job (one reporting group) as fio reported it."""
    options = job.options
    try:
        jobs = int(options.get("numjobs", "1") or 1)
        depth = int(options.get("iodepth", "1") or 1)
    except ValueError:
        return None
    directions = [Direction(d.iops, d.clat_mean_ns / 1000,
                            max(d.lat_mean_ns, d.clat_mean_ns) / 1000, d.runtime_ms)
                  for d in (job.read, job.write) if not d.empty]
    return little(directions, jobs, queue_depth(options, depth), closed=closed_loop(options),
                  sync=is_sync(options))


@dataclass
class _Tally:
    """Little's law over a test's rounds, cell by cell."""

    jobs: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    cells: dict[str, CellCheck] = field(default_factory=dict)
    peak_bw: dict[str, float] = field(default_factory=dict)  # direction -> bytes/s

    def add(self, job: JobResult, where: str) -> None:
        for name, d in (("read", job.read), ("write", job.write)):
            self.peak_bw[name] = max(self.peak_bw.get(name, 0.0), d.bw_bytes_per_s)
        verdict = job_verdict(job)
        if verdict is None:
            return
        self.jobs += 1
        self.statuses[verdict.status] = self.statuses.get(verdict.status, 0) + 1
        name = job.name or "job"
        kept = self.cells.get(name)
        severity = _SEVERITY.get(verdict.status, 0)
        if kept is None or severity > _SEVERITY.get(kept.status, 0):
            self.cells[name] = CellCheck(name, verdict.status, 1,
                                         f"{where}: {verdict.message}")
        elif kept.status == verdict.status:
            self.cells[name] = CellCheck(name, kept.status, kept.rounds + 1, kept.message)


#: steps that are a measured fio run cut into rounds afterwards (the SLC probe's write,
#: Host Idle Recovery's way back to the baseline); other steps prepare (purge, fill, ...)
MEASURED_STEPS = ("write", "fio")


def _outputs(test: TestData) -> Iterator[tuple[str, str]]:
    """Each measured fio output of the test, and where it is (``round 3``)."""
    for rnd in test.rounds:
        if rnd.stdout:
            yield f"round {rnd.round_no}", rnd.stdout
    for step in test.steps:
        if step.kind in MEASURED_STEPS and step.fio is not None and step.fio.stdout:
            yield f"the {step.kind} run", step.fio.stdout


def _jobs(test: TestData) -> Iterator[tuple[str, JobResult]]:
    for where, stdout in _outputs(test):
        try:
            yield from ((where, job) for job in parse_fio_output(stdout).jobs)
        except UserError:
            continue  # a round fio left unparsable was failed when it ran


def _buffered(test: TestData) -> bool:
    """A measured round ran fio with ``direct=0``, or its cells say their I/O was not
    direct (the copy preset's cp)."""
    return any(rnd.job_text and _BUFFERED.search(rnd.job_text) for rnd in test.rounds) or any(
        c.get("direct") is False for rnd in test.rounds for c in rnd.cells)


def _planned_buffered(run: RunData) -> bool:
    """The run asked for cached I/O: its plan says ``direct`` false, or it ran in a
    directory (the file-system presets work through the file system as applications do)."""
    options = run.plan.get("options")
    planned = options.get("direct") if isinstance(options, dict) else None
    return planned is False or run.target.get("kind") == "directory"


@dataclass(frozen=True)
class Stack:
    """What the target's stack says, read when the run ends (local targets only)."""

    layers: tuple[Layer, ...] = ()
    link: tuple[str, float] | None = None  # (the link in words, its limit in bytes/s)


def read_stack(target: dict[str, Any], *, sysfs: Any = SYSFS) -> Stack:
    """The loop devices without direct I/O under the target and its PCIe link's limit."""
    path, kind, name = (str(target.get(k) or "") for k in ("path", "kind", "name"))
    try:
        leaves = members_of_target(path, kind, name, sysfs=sysfs)
    except (UserError, OSError):
        leaves = []
    if kind == "block" and name and name not in leaves:
        leaves = [name, *leaves]
    layers = []
    for leaf in leaves:
        loop = block_dir(leaf, sysfs=sysfs) / "loop"
        if loop.is_dir() and read_attr(loop / "dio") != "1":
            layers.append(Layer(f"/dev/{leaf}", "has no direct I/O (loop dio off)"))
    link = None
    if kind == "block" and name:
        pci = pci_attachment(name, sysfs=sysfs)
        if pci is not None:
            speed, width = pci.get("link_speed"), pci.get("link_width")
            limit = pcie_limit_bytes_per_s(str(speed) if speed else None,
                                           str(width) if width else None)
            if limit is not None:
                link = (f"PCIe link ({speed} x{width})", limit)
    return Stack(tuple(layers), link)


#: a run another run made (the RAID matrix's level): its id in the test's result
CHILD_KEY = "child_run"
ChildLoader = Callable[[str], RunData | None]


def _child_checks(test: TestData, load: ChildLoader | None) -> list[ConsistencyChecks]:
    """The checks of the run a test stands for (a matrix level's own run): stored with it,
    else judged from its stored fio output."""
    child_id = test.result.get(CHILD_KEY) if isinstance(test.result, dict) else None
    child = load(child_id) if load is not None and isinstance(child_id, str) else None
    if child is None:
        return []
    stored = checks_of(child.events)
    return [stored.get(t.name) or check_test(child, t, Stack()) for t in child.tests]


def _merged(test: str, children: list[ConsistencyChecks]) -> ConsistencyChecks:
    """A matrix level's checks: those of its own run's tests together."""
    statuses: dict[str, int] = {}
    for c in children:
        for status, n in c.statuses.items():
            statuses[status] = statuses.get(status, 0) + n
    cells = [dataclasses.replace(cell, cell=f"{c.test}: {cell.cell}") for c in children
             for cell in c.cells]
    cache = next((c.cache for c in children if c.cache.memory), children[0].cache)
    jobs = sum(c.jobs_checked for c in children)
    return summary(test, jobs, statuses, cells, cache,
                   None if jobs else "its run's measured rounds have no fio output")


def check_test(run: RunData, test: TestData, stack: Stack,
               load: ChildLoader | None = None) -> ConsistencyChecks:
    """The checks of one stored test (its rounds loaded with their raw fio output; a test
    that stands for a run of its own, ``load`` reads that run)."""
    children = _child_checks(test, load)
    if children:
        return _merged(test.name, children)
    tally = _Tally()
    for where, job in _jobs(test):
        tally.add(job, where)
    layers = list(stack.layers)
    if _buffered(test):
        by_design = _planned_buffered(run)
        layers.append(Layer("the I/O", "is buffered (fio direct=0, through the page cache)" + (
            ", as the suite defines it" if by_design else ""), by_design))
    over = None
    if stack.link is not None:
        what, limit = stack.link
        over = next((o for d, bw in sorted(tally.peak_bw.items())
                     if (o := over_limit(bw, limit, what, f"{run.target.get('path')} {d}"))),
                    None)
    verdict = cache_bound(layers, over)
    cache = CacheCheck(verdict.memory, verdict.by_design, verdict.message,
                       [layer.text for layer in verdict.layers])
    cells = sorted(tally.cells.values(), key=lambda c: (c.status not in MARKED, c.cell))
    why = None if tally.jobs else "no fio output is stored with its measured rounds (a " \
        "database benchmark's, a copy by cp, a check kept as figures only)"
    return summary(test.name, tally.jobs, tally.statuses, cells, cache, why)


def check_run(run: RunData, stack: Stack, load: ChildLoader | None = None
              ) -> list[ConsistencyChecks]:
    return [check_test(run, test, stack, load) for test in run.tests]


def record_checks(store: Store, run_id: str, *, local: bool = True) -> list[ConsistencyChecks]:
    """Check every test of the stored run and store one event per test (``local``: the
    target is on this host, so its stack is read from sysfs)."""
    run = store.load(run_id, with_raw=True)
    stack = read_stack(run.target) if local else Stack()

    def load(child: str) -> RunData | None:
        try:
            return store.load(child, with_raw=True)
        except UserError:
            return None

    checks = check_run(run, stack, load)
    for c in checks:
        store.add_event(run_id, c.test, EVENT_KIND, c.message, c.to_json())
    return checks


def lines(checks: Iterable[ConsistencyChecks]) -> list[str]:
    """What ``ssdlab run`` prints of them at the end: the run-level verdicts and every
    contradiction."""
    out: list[str] = []
    for c in checks:
        if c.cache.memory and f"WARNING: {c.cache.message}" not in out:
            out.append(f"WARNING: {c.cache.message}")
        for cell in c.marked:
            out.append(f"{c.test}: {cell.cell}: {cell.message}")
    return out
