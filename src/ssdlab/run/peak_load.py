"""``--threads auto --qd auto``: the load the most recent peak run (docs/peak.md) found
for the target, read from the store the run writes to.

IOPS-type tests take the 4 KiB random peak, throughput tests the 128 KiB sequential one;
of each, the write peak when the peak run has it (the suites that use it write), else
the read peak. Without such a run: a one-line error telling the user to run
``ssdlab run peak`` first (exit status 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ssdlab.errors import UserError, command
from ssdlab.plan.peak import SUITE, WORKLOADS, PeakResult
from ssdlab.store.db import Store
from ssdlab.store.location import StoreLocation, default_store_location
from ssdlab.store.records import RunData

AUTO = "auto"


@dataclass(frozen=True)
class PeakLoad:
    """The load a peak run found for one kind of test."""

    run_id: str
    workload: str
    engine: str
    threads: int
    iodepth: int

    @property
    def origin(self) -> str:
        return (f"peak run {self.run_id} ({self.workload}: {self.engine} {self.threads} x QD "
                f"{self.iodepth})")

    @property
    def text(self) -> str:
        return f"threads/QD from {self.origin}"


def _location(store: str | None) -> StoreLocation:
    return StoreLocation.parse(store) if store else default_store_location()


def _peak_runs(store: Store, path: str) -> list[str]:
    return [r.run_id for r in store.list_runs()
            if r.suite == SUITE and os.path.realpath(r.target_path) == os.path.realpath(path)]


def _load_of(run: RunData, kind: str) -> PeakLoad | None:
    tests = {t.name: t for t in run.tests if t.status == "complete"}
    for w in sorted((w for w in WORKLOADS if w.kind == kind), key=lambda w: not w.writes):
        test = tests.get(w.name)
        if test is None:
            continue
        peak = PeakResult.from_json(test.result, f"run {run.run_id} {w.name}").peak
        if peak is not None:
            return PeakLoad(run.run_id, w.name, peak.engine, peak.threads, peak.iodepth)
    return None


def peak_load(target: str, store: str | None, kind: str, option: str) -> PeakLoad:
    """The newest peak run's load for ``kind`` ("iops" or "throughput") on ``target``;
    UserError naming ``option`` when there is none."""
    location = _location(store)
    missing = (f"{option} auto: no peak run for {target} in the store {location.display()}"
               f"; run `{command()} run peak --target {target}` first")
    if location.path is not None and not location.path.exists():
        raise UserError(missing)
    with Store.open_readonly(location) as s:
        for run_id in _peak_runs(s, target):
            found = _load_of(s.load(run_id), kind)
            if found is not None:
                return found
    raise UserError(missing)
