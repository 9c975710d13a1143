"""The registry of suites: one line each. The command line (``ssdlab run``, ``--config``,
``resume``), ``show``, ``export`` and the report reach every suite through it.

A suite is three parts (docs/architecture.md, "A suite is one thing"):

* its plan module's :class:`~ssdlab.plan.suite.SuiteSpec` (name, help, options and config
  keys, tests and their result types), imported here;
* its run module's :class:`~ssdlab.run.suite.Runner` named ``RUNNER`` (prepare, dry run,
  progress, run, resume), imported when a run starts;
* its pages module's :class:`~ssdlab.report.suite.SuitePages` named ``PAGES`` (report
  pages, ``show`` lines, comparison overlay, what ``run`` prints at the end), imported
  when a stored run is shown.

``tests/unit/test_suites.py`` checks that every registered suite has every part.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ssdlab.errors import UserError
from ssdlab.plan import (
    block_presets,
    curves,
    db,
    file_presets,
    latency_iops,
    matrix,
    op_sweep,
    peak,
    pts,
    replay,
    saturation,
    slc_probe,
    verify,
)
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.suite import SuiteSpec
from ssdlab.reference import published

if TYPE_CHECKING:
    from ssdlab.jsonrecord import JsonObject, Record
    from ssdlab.report.suite import SuitePages
    from ssdlab.run.suite import Runner
    from ssdlab.store.records import RunData, TestData


@dataclass(frozen=True)
class Suite:
    """One registered suite: its spec, and where its runner and its pages are."""

    spec: SuiteSpec[Any]
    run_module: str | None  # in ssdlab.run (or a dotted path); None: runs are imported
    pages_module: str  # in ssdlab.report (or a dotted path)

    @property
    def name(self) -> str:
        return self.spec.name

    def runner(self) -> Runner[Any, Any]:
        """Its run module's ``RUNNER``, or what its ``make_runner`` makes given the
        registry's lookup (a suite of suites: ``ssdlab.run.suite.SuiteLookup``)."""
        from ssdlab.run.suite import Runner
        if self.run_module is None:
            raise UserError(f"runs of the {self.name} suite are imported, not run")
        module = _module("ssdlab.run", self.run_module)
        make = getattr(module, "make_runner", None)
        runner = make(find) if make is not None else module.RUNNER
        assert isinstance(runner, Runner), f"{self.run_module}: not a Runner"
        return runner

    def pages(self) -> SuitePages:
        from ssdlab.report.suite import SuitePages
        pages = _module("ssdlab.report", self.pages_module).PAGES
        assert isinstance(pages, SuitePages), f"{self.pages_module}.PAGES is not SuitePages"
        return pages


def _module(package: str, name: str) -> Any:
    """``package.name``, or ``name`` itself when it is a dotted path (a suite outside)."""
    return importlib.import_module(name if "." in name else f"{package}.{name}")


#: in the order ``ssdlab run --help`` lists them
SUITES: tuple[Suite, ...] = (
    Suite(pts.SPEC, "pts_run", "pts_pages"),
    Suite(block_presets.ATTO, "block_preset_run", "block_preset_pages"),
    Suite(block_presets.CDM, "block_preset_run", "block_preset_pages"),
    Suite(curves.SPEC, "curves_run", "curves_pages"),
    Suite(db.SPEC, "db_run", "db_pages"),
    Suite(file_presets.AJA, "file_presets_run", "file_presets_pages"),
    Suite(file_presets.DISKFILL, "file_presets_run", "file_presets_pages"),
    Suite(file_presets.SMALLFILES, "file_presets_run", "file_presets_pages"),
    Suite(file_presets.COPY, "file_presets_run", "file_presets_pages"),
    Suite(block_presets.IOMETER, "block_preset_run", "block_preset_pages"),
    Suite(latency_iops.SPEC, "latency_iops_run", "latency_iops_pages"),
    Suite(op_sweep.SPEC, "op_sweep_run", "op_sweep_pages"),
    Suite(peak.SPEC, "peak_run", "peak_pages"),
    Suite(replay.SPEC, "replay_run", "replay_pages"),
    Suite(saturation.SPEC, "saturation_run", "saturation_pages"),
    Suite(slc_probe.SPEC, "slc_probe_run", "slc_probe_pages"),
    Suite(verify.SPEC, "verify_run", "verify_pages"),
    Suite(matrix.SPEC, "matrix_run", "matrix_pages"),
    Suite(published.SPEC, None, "published_pages"),
)


def all_suites() -> Iterator[Suite]:
    return iter(SUITES)


def runnable() -> list[Suite]:
    return [s for s in SUITES if s.spec.runnable]


def find(name: str) -> Suite | None:
    """The suite named ``name`` (a stored run's suite), or None."""
    return next((s for s in SUITES if s.name == name), None)


def config_schemas() -> dict[str, dict[str, Kind]]:
    """Every runnable suite's config-file keys and their kinds, by suite."""
    return {s.name: s.spec.config_schema() for s in runnable()}


def result_type(run: RunData, test: TestData) -> type[Record] | None:
    """The record type of a stored test's result (None: its suite is not registered, or
    does not name the test)."""
    suite = find(run.suite)
    return suite.spec.result_type(test.name) if suite is not None else None


def result_json(run: RunData, test: TestData) -> JsonObject:
    """A stored test's result through its typed record (StoredDataError when the stored
    document does not have its shape), as the export writes it."""
    record = result_type(run, test)
    if record is None:
        return test.result
    return record.from_json(test.result, f"run {run.run_id} test {test.name}: result"
                            ).to_json()
