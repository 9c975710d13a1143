"""``ssdlab resume`` of the resumable suites on the suite contract (saturation,
latency-iops): their runners prepare a stopped run's stored arguments again on its target,
which must be the same one; a test file ssdlab made that is missing is made again."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from ssdlab.errors import TargetError, UserError
from ssdlab.plan.latency_iops import LatencyIopsArgs
from ssdlab.plan.saturation import SaturationArgs
from ssdlab.run.prepare import TargetRequest
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, RunHead
from ssdlab.suites import find
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.identity import identify_file
from tests.support.records import doc

MIB = 1 << 20
SIZE = 64 * MIB  # the smallest target a suite takes
ARGS: dict[str, Any] = {
    "saturation": SaturationArgs(profile="quick", waits="1"),
    "latency-iops": LatencyIopsArgs(profile="quick", threads="1", max_threads=2),
}


def _stopped(tmp_path: Path, suite: str, args: dict[str, Any] | None) -> RunData:
    target = tmp_path / "t.img"
    create_file_target(str(target), SIZE)
    store = Store.open(tmp_path / "s.sqlite")
    plan: dict[str, Any] = {"suite": suite}
    if args is not None:
        plan["args"] = args
    run_id = store.new_run(RunHead(
        suite, "quick", True, identify_file(str(target)).to_dict(), {}, doc(plan), {},
        ["run", suite]))
    return store.load(run_id)


def _prepare_resume(run: RunData) -> Any:
    suite = find(run.suite)
    assert suite is not None and suite.spec.resumable
    prepare = suite.runner().prepare_resume
    assert prepare is not None
    return prepare(run, TargetRequest(str(run.target["path"]), None, None, False, "fio"))


@pytest.mark.parametrize("suite", list(ARGS))
def test_a_stopped_run_is_prepared_again_from_its_stored_arguments(
        tmp_path: Path, suite: str) -> None:
    run = _stopped(tmp_path, suite, dataclasses.asdict(ARGS[suite]))
    prepared = _prepare_resume(run)
    assert prepared.args == ARGS[suite]
    assert not prepared.target.create_file


@pytest.mark.parametrize("suite", list(ARGS))
def test_a_missing_test_file_is_made_again_at_its_recorded_size(
        tmp_path: Path, suite: str) -> None:
    run = _stopped(tmp_path, suite, dataclasses.asdict(ARGS[suite]))
    os.remove(tmp_path / "t.img")  # killed while a purge was recreating it
    prepared = _prepare_resume(run)
    assert prepared.target.create_file and prepared.target.info.capacity_bytes == SIZE


@pytest.mark.parametrize("suite", list(ARGS))
def test_a_changed_target_is_refused(tmp_path: Path, suite: str) -> None:
    run = _stopped(tmp_path, suite, dataclasses.asdict(ARGS[suite]))
    os.truncate(tmp_path / "t.img", SIZE + MIB)
    with pytest.raises(TargetError, match=f"refusing to resume run {run.run_id}: .* is not "
                       "the same target \\(capacity_bytes was"):
        _prepare_resume(run)


@pytest.mark.parametrize("suite", list(ARGS))
def test_arguments_of_another_version_are_refused_in_one_line(
        tmp_path: Path, suite: str) -> None:
    run = _stopped(tmp_path, suite, {**dataclasses.asdict(ARGS[suite]), "gone": 1})
    with pytest.raises(UserError) as info:
        _prepare_resume(run)
    assert str(info.value).startswith(
        f"run {run.run_id} was made by another ssdlab version and cannot be resumed by this "
        "one (")
    assert "gone" in str(info.value) and "\n" not in str(info.value)
    (tmp_path / "s.sqlite").unlink()
    run = _stopped(tmp_path, suite, None)
    with pytest.raises(UserError, match=f"run {run.run_id} has no stored options to resume "
                       "from"):
        _prepare_resume(run)
