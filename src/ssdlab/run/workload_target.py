"""The target of a workload suite (curves, replay): a block device or an ssdlab test file
(``--target``, every guardrail of :func:`ssdlab.run.prepare.prepare_target`), or a test
file ssdlab makes in a work directory under the user's directory (``--dir``), removed with
everything in it when the run ends."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass

from ssdlab import __version__
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.units import format_bytes
from ssdlab.run.prepare import PreparedTarget, prepare_target
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.identity import TargetInfo, check_fio_version, fio_version, host_info
from ssdlab.targets.safety import DestroyData
from ssdlab.targets.workdir import WORK_PREFIX, DirInfo, WorkDir, describe_dir


@dataclass(frozen=True)
class WorkloadTarget:
    base: PreparedTarget
    dir: DirInfo | None  # --dir: the test file is made in a work directory there
    file_name: str

    @property
    def info(self) -> TargetInfo:
        return self.base.info

    def describe(self) -> str:
        if self.dir is not None:
            share = " (a network share)" if self.dir.network else ""
            return (f"a {format_bytes(self.info.capacity_bytes)} test file in a work directory "
                    f"under {self.dir.path} ({self.dir.fs_type}{share}), removed afterwards")
        if self.base.create_file:
            return (f"{self.info.path} (a new {format_bytes(self.info.capacity_bytes)} "
                    "test file, created and fully allocated)")
        return f"{self.info.path} ({self.info.device_class})"


def _planned(path: str, size: int, details: dict[str, object]) -> TargetInfo:
    return TargetInfo(path=path, kind="file", name=os.path.basename(path),
                      device_class="file", model=None, serial=None, firmware=None,
                      capacity_bytes=size, logical_sector_bytes=512,
                      physical_sector_bytes=512, rotational=None, numa_node=None,
                      scheduler=None, discard_max_bytes=None, details=details)


def prepare_workload_target(target: str | None, directory: str | None, size: int | None,
                            destroy_data: DestroyData, fio: str, file_name: str,
                            dir_default_size: int | None = None) -> WorkloadTarget:
    """Exactly one of ``target`` and ``directory``; a one-line UserError before any I/O.

    With ``--dir`` and no ``--size``, the test file is ``dir_default_size`` bytes."""
    if (target is None) == (directory is None):
        raise UserError("give exactly one of --target PATH (a block device or test file) "
                        "and --dir DIR (a directory to make a test file in)")
    if target is not None:
        return WorkloadTarget(prepare_target(target, size, destroy_data, fio), None,
                              file_name)
    assert directory is not None
    if destroy_data is not False:
        raise UserError("--destroy-data applies to block devices; --dir needs none")
    if size is None:
        size = dir_default_size
    if size is None:
        raise UserError(f"--dir {directory}: give --size for the test file made there "
                        "(e.g. --size 1GiB)")
    version = fio_version(fio)
    check_fio_version(version)
    info = describe_dir(directory)
    if size > info.free_bytes:
        raise TargetError(f"--dir {info.path}: {format_bytes(size)} needed, "
                          f"{format_bytes(info.free_bytes)} free")
    planned = _planned(os.path.join(info.path, f"{WORK_PREFIX}XXXXXX", file_name), size,
                       {"planned": True, "dir": info.to_dict()})
    base = PreparedTarget(planned, True, host_info(), {"ssdlab": __version__, "fio": version})
    return WorkloadTarget(base, info, file_name)


@contextlib.contextmanager
def materialised(t: WorkloadTarget) -> Iterator[TargetInfo]:
    """The target as the run uses it: made (and for --dir removed again) around the run."""
    if t.dir is not None:
        with WorkDir(t.dir, t.info.capacity_bytes) as work:
            info = create_file_target(str(work.path / t.file_name), t.info.capacity_bytes)
            details = {**info.details, "dir": t.dir.to_dict()}
            yield dataclasses.replace(info, details=details)
        return
    if t.base.create_file:
        yield create_file_target(t.info.path, t.info.capacity_bytes)
        return
    yield t.info
