"""A --dir on each host (run/host_dirs.py): the agent's side checks, makes and removes
its work directory and nothing else; the coordinator's side turns a checked directory
into the run's target part."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ssdlab import __version__
from ssdlab.errors import TargetError
from ssdlab.run import host_dirs
from ssdlab.run.agent_wire import PROTOCOL, Hello
from ssdlab.targets.filetarget import is_ssdlab_file
from ssdlab.targets.workdir import WORK_PREFIX

MIB = 1 << 20
HELLO = Hello(PROTOCOL, __version__, "fio-3.33", hostname="h1")


def test_a_directory_is_checked_without_writing(tmp_path: Path) -> None:
    found = host_dirs.check_dir(str(tmp_path), MIB, HELLO)
    assert found.info["path"] == str(tmp_path.resolve())
    assert found.info["kind"] == "directory" and found.info["network_share"] is False
    assert os.listdir(tmp_path) == []
    info = host_dirs._dir_info(found.info)
    target = info.as_target(16 * MIB)
    assert (target.kind, target.capacity_bytes, target.device_class) == (
        "directory", 16 * MIB, "directory")
    with pytest.raises(TargetError, match="needed"):
        host_dirs.check_dir(str(tmp_path), 1 << 60, HELLO)
    with pytest.raises(TargetError, match="not a directory"):
        host_dirs.check_dir(str(tmp_path / "nope"), MIB, HELLO)


def test_the_work_directory_is_made_and_removed(tmp_path: Path) -> None:
    made = host_dirs.make_work(str(tmp_path), 2 * MIB, MIB, "cdm.dat")
    work = Path(made.path).parent
    assert work.parent == tmp_path.resolve() and work.name.startswith(WORK_PREFIX)
    assert is_ssdlab_file(made.path) and os.path.getsize(made.path) == MIB
    gone = host_dirs.remove_work(str(work))
    assert gone.removed and not work.exists() and os.listdir(tmp_path) == []


def test_nothing_but_a_work_directory_of_files_is_removed(tmp_path: Path) -> None:
    other = tmp_path / "data"
    other.mkdir()
    with pytest.raises(TargetError, match="not a work directory"):
        host_dirs.remove_work(str(other))
    nested = tmp_path / f"{WORK_PREFIX}x"
    (nested / "sub").mkdir(parents=True)
    with pytest.raises(TargetError, match="more than files"):
        host_dirs.remove_work(str(nested))
    assert other.exists() and nested.exists()
    with pytest.raises(Exception, match="bad test file name"):
        host_dirs.make_work(str(tmp_path), 2 * MIB, MIB, "../x")
