"""The target of a workload suite (curves, replay): a block device or an ssdlab test file
(``--target``, every guardrail of :func:`ssdlab.run.prepare.prepare_target`), or a test
file ssdlab makes in a work directory under the user's directory (``--dir``), removed with
everything in it when the run ends.

Their runs are :class:`~ssdlab.run.session.SessionRun` s whose target is made for the run
(:class:`WorkloadRun`: the test file, and with ``--dir`` its work directory, exist only
while the run does)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ssdlab.errors import TargetError, UserError
from ssdlab.run.prepare import (
    PreparedTarget,
    TargetRequest,
    checked_versions,
    planned_file,
    prepare_device,
)
from ssdlab.run.session import SessionRun
from ssdlab.run.suite import PreparedSuite, RunSettings, made_file
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.identity import TargetInfo, host_info
from ssdlab.targets.workdir import WORK_PREFIX, DirInfo, WorkDir, describe_dir
from ssdlab.units import format_bytes


@dataclass(frozen=True)
class WorkloadTarget(PreparedTarget):
    """A prepared target; with ``--dir``, the directory its test file will be made in."""

    dir: DirInfo | None  # --dir: the test file is made in a work directory there
    file_name: str

    def describe(self) -> str:
        if self.dir is not None:
            share = " (a network share)" if self.dir.network else ""
            return (f"a {format_bytes(self.info.capacity_bytes)} test file in a work directory "
                    f"under {self.dir.path} ({self.dir.fs_type}{share}), removed afterwards")
        if self.create_file:
            return (f"{self.info.path} (a new {format_bytes(self.info.capacity_bytes)} "
                    "test file, created and fully allocated)")
        return f"{self.info.path} ({self.info.device_class})"

    def dir_dict(self) -> dict[str, object] | None:
        """The --dir as the stored plan keeps it (None: --target)."""
        return None if self.dir is None else self.dir.to_dict()


def prepare_workload_target(request: TargetRequest, file_name: str,
                            dir_default_size: int | None = None) -> WorkloadTarget:
    """Exactly one of ``--target`` and ``--dir``; a one-line UserError before any I/O.

    With ``--dir`` and no ``--size``, the test file is ``dir_default_size`` bytes."""
    if (request.target is None) == (request.dir is None):
        raise UserError("give exactly one of --target PATH (a block device or test file) "
                        "and --dir DIR (a directory to make a test file in)")
    if request.dir is None:
        base = prepare_device(request)
        return WorkloadTarget(base.info, base.create_file, base.host, base.versions, None,
                              file_name)
    if request.destroy_data is not False:
        raise UserError("--destroy-data applies to block devices; --dir needs none")
    size = request.size_bytes if request.size_bytes is not None else dir_default_size
    if size is None:
        raise UserError(f"--dir {request.dir}: give --size for the test file made there "
                        "(e.g. --size 1GiB)")
    versions = checked_versions(request.fio)
    info = describe_dir(request.dir)
    if size > info.free_bytes:
        raise TargetError(f"--dir {info.path}: {format_bytes(size)} needed, "
                          f"{format_bytes(info.free_bytes)} free")
    path = os.path.join(info.path, f"{WORK_PREFIX}XXXXXX", file_name)
    planned = dataclasses.replace(planned_file(path, size),
                                  details={"planned": True, "dir": info.to_dict()})
    return WorkloadTarget(planned, True, host_info(), versions, info, file_name)


@contextlib.contextmanager
def materialised(t: WorkloadTarget) -> Iterator[TargetInfo]:
    """The target as the run uses it: made (and for --dir removed again) around the run."""
    if t.dir is not None:
        with WorkDir(t.dir, t.info.capacity_bytes) as work:
            info = create_file_target(str(work.path / t.file_name), t.info.capacity_bytes)
            details = {**info.details, "dir": t.dir.to_dict()}
            yield dataclasses.replace(info, details=details)
        return
    if t.create_file:
        yield made_file(t.info)
        return
    yield t.info


def dry_run_head(t: WorkloadTarget, what: str) -> str:
    """The first line of a workload suite's ``--dry-run``: ``what`` the target."""
    return f"DRY RUN: nothing will be written. {what} {t.describe()}"


OptionsT = TypeVar("OptionsT", bound=RunSettings)


@dataclass(frozen=True)
class PreparedWorkload(PreparedSuite[OptionsT]):
    """A workload suite's run on its target, checked."""

    target: WorkloadTarget


PW = TypeVar("PW", bound=PreparedWorkload[Any])


class WorkloadRun(SessionRun[PW]):
    """The shared run skeleton on a workload target, which is made for the run (with
    ``--dir``, in a work directory removed afterwards): the run's session and fio jobs use
    it as made."""

    @contextlib.contextmanager
    def target_in_place(self) -> Iterator[None]:
        with materialised(self.p.target) as info:
            self.session.info = info
            self.session.fio = dataclasses.replace(self.session.fio, target_path=info.path)
            yield
