"""The self-consistency checks of a run, when it ends (docs/consistency.md): every fio job
of every measured round of every test, from fio's own output as stored, against Little's
law; and the target's stack (loop devices without direct I/O, fio ``direct=0``, a PCIe
link's limit, direct I/O not aligned to a btrfs sector) and what the devices below moved
against what fio moved (the ``devices`` events of its rounds) for the cache-bound verdict.
One ``consistency`` event per test, its detail a
:class:`ssdlab.plan.consistency.ConsistencyChecks`.

Every suite's run ends through :func:`record_checks` (``run.session.finish_complete``), so
the checks cover every suite whatever it builds its figures from; a test without fio
output (the database suite's sysbench and pgbench) says it was not checked, and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ssdlab.analysis.consistency import (
    EXCEEDS,
    OPEN,
    TOTAL,
    Direction,
    Layer,
    LittleVerdict,
    cache_bound,
    closed_loop,
    far_below,
    is_sync,
    little,
    misaligned,
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
    cell_labels,
    checks_of,
    summary,
)
from ssdlab.plan.device_rounds import DeviceIO, DeviceRound, device_rounds, mib
from ssdlab.plan.specs import block_label
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, TestData
from ssdlab.targets.identity import SYSFS, block_dir, read_attr
from ssdlab.targets.members import btrfs_sector, members_of_target
from ssdlab.targets.topology import pci_attachment
from ssdlab.units import parse_size

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
    options: dict[str, dict[str, str]] = field(default_factory=dict)  # cell -> fio options

    def add(self, job: JobResult, where: str) -> None:
        for name, d in (("read", job.read), ("write", job.write)):
            self.peak_bw[name] = max(self.peak_bw.get(name, 0.0), d.bw_bytes_per_s)
        self.options.setdefault(job.name or "job", job.options)
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
    #: the sector of the btrfs a file or directory target is on (None: not on btrfs):
    #: btrfs serves direct I/O not aligned to it through the page cache
    btrfs_sector: int | None = None


def read_stack(target: dict[str, Any], *, sysfs: Any = SYSFS) -> Stack:
    """The loop devices without direct I/O under the target, its PCIe link's limit and
    the sector of the btrfs it is on."""
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
    sector = None
    if kind in ("file", "directory") and path:
        with contextlib.suppress(UserError, OSError, ValueError):
            sector = btrfs_sector(path, sysfs=sysfs)
    return Stack(tuple(layers), link, sector)


# -- what the devices below moved, against fio ----------------------------------------------

#: each direction: its name in a verdict and fio's verb
DIRECTIONS = (("reads", "read"), ("writes", "wrote"))
#: a verdict names at most this many cells, then says how many more
NAMED_CELLS = 8
#: reads far below fio's are put down to space never written where at least this share
#: of a file target had not been written before one of their rounds
NEVER_WRITTEN_SHARE = 0.1


@dataclass
class _Moved:
    """What fio and the devices below moved in some cells over a test's rounds."""

    cells: tuple[str, ...]
    rounds: int = 0
    host: tuple[int, int] = (0, 0)  # read, write bytes
    device: tuple[int, int] = (0, 0)
    #: the most of a file target that no write had reached before one of those rounds
    never_written: float | None = None

    def add(self, io: DeviceIO, never_written: float | None = None) -> None:
        if never_written is not None:
            self.never_written = max(never_written, self.never_written or 0.0)
        self.rounds += 1
        self.host = (self.host[0] + io.host_read_bytes, self.host[1] + io.host_write_bytes)
        self.device = (self.device[0] + io.device_read_bytes,
                       self.device[1] + io.device_write_bytes)

    def evidence(self, direction: int) -> str:
        verb = DIRECTIONS[direction][1]
        return (f"fio {verb} {mib(self.host[direction])}, the devices below {verb} "
                f"{mib(self.device[direction])}")

    @property
    def both(self) -> str:
        return (f"fio read {mib(self.host[0])}, wrote {mib(self.host[1])}; the devices below "
                f"read {mib(self.device[0])}, wrote {mib(self.device[1])}")

    @classmethod
    def of(cls, parts: Sequence[_Moved]) -> _Moved:
        """Several stretches added up."""
        never = [p.never_written for p in parts if p.never_written is not None]
        return cls(tuple(c for p in parts for c in p.cells), max((p.rounds for p in parts),
                                                                 default=0),
                   (sum(p.host[0] for p in parts), sum(p.host[1] for p in parts)),
                   (sum(p.device[0] for p in parts), sum(p.device[1] for p in parts)),
                   max(never) if never else None)


def _stretches(rounds: Sequence[DeviceRound]) -> list[_Moved]:
    """The test's rounds added up by stretch: each cell alone where the gate told the
    cells apart, else the cells of a round together."""
    by: dict[tuple[str, ...], _Moved] = {}
    for r in rounds:
        for io in r.cells or [r.total]:
            key = tuple(io.cells)
            by.setdefault(key, _Moved(key)).add(io, r.never_written)
    return list(by.values())


def _block_sizes(options: Mapping[str, str]) -> list[int]:
    """A job's block sizes (``bs``: one, or one per direction); [] when not plain sizes."""
    try:
        return [parse_size(part) for part in (options.get("bs") or "4096").split(",")
                if part]
    except ValueError:
        return []


@dataclass(frozen=True)
class _Finding:
    """Cells that did not measure the drive: in which direction, why, and the bytes."""

    what: str  # "reads", "writes", or "" (direct I/O through the page cache)
    reason: str
    moved: _Moved
    by_design: bool = False

    def text(self, names: str) -> str:
        if not self.what:
            counted = f"; {self.moved.both}" if self.moved.rounds else ""
            return f"{names}: {self.reason}{counted}"
        d = 0 if self.what == "reads" else 1
        return f"{self.what} of {names}: {self.moved.evidence(d)}: {self.reason}"

    @property
    def cell_text(self) -> str:
        """The finding as one of its cells' footnotes says it."""
        over = f" over {self.moved.rounds} rounds" if self.moved.rounds > 1 else ""
        if not self.what:
            return f"{self.reason} ({self.moved.both}{over})" if self.moved.rounds \
                else self.reason
        d = 0 if self.what == "reads" else 1
        return f"{self.what}: {self.moved.evidence(d)}{over}: {self.reason}"


class _Judge:
    """The cache-bound verdict from the devices' counts and the stack (module docs)."""

    def __init__(self, tally: _Tally, stack: Stack, planned_buffered: bool) -> None:
        self.options = tally.options
        self.stack = stack
        self.planned_buffered = planned_buffered
        sector = stack.btrfs_sector or 0
        self.misaligned = {name for name, o in tally.options.items()
                           if o.get("direct") == "1" and misaligned(_block_sizes(o), sector)}

    @property
    def fallback(self) -> str:
        return (f"btrfs falls back to buffered I/O for direct I/O not aligned to its "
                f"{block_label(self.stack.btrfs_sector or 0)} sector")

    def _buffered(self, cells: Collection[str]) -> bool:
        return any(self.options.get(c, {}).get("direct") == "0" for c in cells)

    def reason(self, direction: int, moved: _Moved) -> str:
        """Why ``moved``'s cells moved far less on the devices than fio did."""
        verb = "served from" if direction == 0 else "held in"
        if moved.cells and all(c in self.misaligned for c in moved.cells):
            return f"{verb} the page cache ({self.fallback})"
        if self._buffered(moved.cells):
            return f"{verb} the page cache (buffered I/O: fio direct=0)"
        never = moved.never_written
        if direction == 0 and never is not None and never >= NEVER_WRITTEN_SHARE:
            return (f"read as zeros without the drive: up to {never:.0%} of the test file "
                    "had never been written (allocated space no write had reached)")
        return f"{verb} a cache above the devices"

    def findings(self, rounds: Sequence[DeviceRound]) -> list[_Finding]:
        found: list[_Finding] = []
        judged: set[str] = set()
        for moved in _stretches(rounds):
            for d, (what, _) in enumerate(DIRECTIONS):
                if far_below(moved.host[d], moved.device[d]):
                    design = self.planned_buffered and self._buffered(moved.cells)
                    found.append(_Finding(what, self.reason(d, moved), moved, design))
                    judged.update(moved.cells)
            if len(moved.cells) == 1 and moved.cells[0] in self.misaligned - judged:
                found.append(_Finding("", f"through the page cache ({self.fallback})", moved))
                judged.add(moved.cells[0])
        for cell in sorted(self.misaligned - judged):  # no counts of its own
            found.append(_Finding("", f"through the page cache ({self.fallback})",
                                  _Moved((cell,))))
        return found


def _named(cells: Iterable[str], labels: Mapping[str, str]) -> str:
    names = sorted({labels.get(c, c) for c in cells})
    more = len(names) - NAMED_CELLS
    return ", ".join(names[:NAMED_CELLS]) + (f" and {more} more" if more > 0 else "")


def _grouped(found: Sequence[_Finding], labels: Mapping[str, str]) -> list[Layer]:
    """The test's layers of findings: one per direction and reason, their bytes added."""
    groups: dict[tuple[str, str, bool], list[_Finding]] = {}
    for f in found:
        groups.setdefault((f.what, f.reason, f.by_design), []).append(f)
    layers = []
    for (what, reason, design), fs in groups.items():
        total = _Moved.of([f.moved for f in fs])
        layers.append(Layer(_Finding(what, reason, total).text(_named(total.cells, labels)), "",
                            design))
    return layers


def _with_findings(cells: Iterable[CellCheck], found: Sequence[_Finding],
                   labels: Mapping[str, str]) -> list[CellCheck]:
    """The cells with their labels and, where a finding (not by design) names them, why
    they measured memory."""
    out = []
    for cell in cells:
        memory = [f.cell_text for f in found if cell.cell in f.moved.cells and not f.by_design]
        out.append(dataclasses.replace(cell, label=labels.get(cell.cell),
                                       memory="; ".join(memory) if memory else None))
    return out


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
    cells = [dataclasses.replace(cell, cell=f"{c.test}: {cell.cell}",
                                 label=f"{c.test}: {cell.name}") for c in children
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
    by_design = _planned_buffered(run)
    if _buffered(test):
        layers.append(Layer("the I/O", "is buffered (fio direct=0, through the page cache)" + (
            ", as the suite defines it" if by_design else ""), by_design))
    labels = cell_labels(c for r in test.rounds for c in r.cells)
    found = _Judge(tally, stack, by_design).findings(device_rounds(run.events).get(test.name, []))
    layers += _grouped(found, labels)
    over = None
    if stack.link is not None:
        what, limit = stack.link
        over = next((o for d, bw in sorted(tally.peak_bw.items())
                     if (o := over_limit(bw, limit, what, f"{run.target.get('path')} {d}"))),
                    None)
    verdict = cache_bound(layers, over)
    cache = CacheCheck(verdict.memory, verdict.by_design, verdict.message,
                       [layer.text for layer in verdict.layers])
    cells = sorted(_with_findings(tally.cells.values(), found, labels),
                   key=lambda c: (not c.marked, c.cell))
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
        store.add_event(run_id, c.test, EVENT_KIND, c.message, c)
    return checks


def lines(checks: Iterable[ConsistencyChecks]) -> list[str]:
    """What ``ssdlab run`` prints of them at the end: the run-level verdicts and every
    contradiction."""
    out: list[str] = []
    for c in checks:
        if c.cache.memory and f"WARNING: {c.cache.message}" not in out:
            out.append(f"WARNING: {c.cache.message}")
        for cell in c.marked:
            out.append(f"{c.test}: {cell.name}: {cell.reason}")
    return out
