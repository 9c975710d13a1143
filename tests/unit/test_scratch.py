"""Scratch directories (engine/scratch.py): named after their ssdlab, removed when their
block ends, and swept by the next ssdlab when a SIGKILL left them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ssdlab.engine import scratch


def dead_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid nobody has now
    return gone.pid


def test_names_say_kind_and_owner() -> None:
    assert scratch.owner("ssdlab-wsat-4242-k3j_x1") == 4242
    assert scratch.owner("ssdlab-gate-17-abc") == 17
    for foreign in ("ssdlab-test-4242-abc", "ssdlab-wsat-x-abc", "ssdlab-wsat-4242",
                    "other-wsat-4242-abc", "ssdlab-bench-peak-abc"):
        assert scratch.owner(foreign) is None, foreign


def test_a_block_s_directory_is_removed_when_it_ends(tmp_path: Path) -> None:
    with scratch.scratch_dir("slc", tmp_path) as made:
        assert made.is_dir() and made.name.startswith(f"ssdlab-slc-{os.getpid()}-")
        (made / "slc_iops.1.log").write_text("0, 1, 0, 4096\n")
    assert not made.exists()
    with pytest.raises(RuntimeError), scratch.scratch_dir("hir", tmp_path) as failed:
        raise RuntimeError("fio failed")
    assert not failed.exists()
    with pytest.raises(ValueError, match="unknown scratch kind"):
        scratch.make("nope", tmp_path)


def test_the_next_ssdlab_sweeps_what_a_killed_one_left(tmp_path: Path) -> None:
    gone = dead_pid()
    left = [tmp_path / f"ssdlab-{k}-{gone}-abc" for k in ("wsat", "gate", "iolog")]
    kept = [tmp_path / f"ssdlab-wsat-{os.getpid()}-mine",  # alive: this process
            tmp_path / f"ssdlab-test-{gone}-abc",  # not a kind ssdlab makes here
            tmp_path / "ssdlab-wsat-notapid-abc", tmp_path / "unrelated"]
    for directory in left + kept:
        directory.mkdir()
        (directory / "log").touch()
    plain = tmp_path / f"ssdlab-hir-{gone}-file"
    plain.touch()  # a file, not a directory
    made = scratch.make("wsat", tmp_path)
    assert [d for d in left if d.exists()] == []
    assert all(d.exists() for d in kept) and plain.exists() and made.is_dir()
