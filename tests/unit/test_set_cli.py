"""``ssdlab run SUITE`` with several targets refuses bad input in one line, before anything
is written: a refused target refuses the whole set, a bad line of ``--targets-file``, a
target given twice. (fio is a stand-in that only tells its version: nothing runs.)"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import one_line_error, ssdlab_in_process

QUICK = ("--profile", "quick", "--tests", "iops", "--block-sizes", "4", "--mixes", "0/100")


@pytest.fixture
def fio(tmp_path: Path) -> str:
    """A fio that only tells its version (nothing here may run fio)."""
    path = tmp_path / "bin" / "fio"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo fio-3.33 && exit 0\nexit 9\n")
    path.chmod(0o755)
    return str(path)


def _run(tmp_path: Path, fio: str, *args: str) -> subprocess.CompletedProcess[str]:
    return ssdlab_in_process("run", "pts", *args, "--size", "64MiB", *QUICK, "--fio", fio,
                             "--store", str(tmp_path / "s.sqlite"))


def _untouched(tmp_path: Path, *made: str) -> None:
    assert not (tmp_path / "s.sqlite").exists()
    for name in made:
        assert not (tmp_path / name).exists(), name


def test_a_refused_target_refuses_the_whole_set(tmp_path: Path, fio: str) -> None:
    foreign = tmp_path / "foreign.img"
    foreign.write_bytes(b"someone's data\n")
    result = _run(tmp_path, fio, "--target", str(tmp_path / "a.img"), "--target",
                  str(foreign), "--target", str(tmp_path / "c.img"))
    assert result.returncode == 3
    assert one_line_error(result) == (
        f"Error: refusing the set: {foreign}: refusing {foreign}: it exists and was not "
        "created by ssdlab; give a new file path or a block device")
    assert result.stdout == ""
    _untouched(tmp_path, "a.img", "c.img")
    assert foreign.read_bytes() == b"someone's data\n"


def test_a_bad_line_of_the_targets_file_is_named(tmp_path: Path, fio: str) -> None:
    listing = tmp_path / "targets.txt"
    listing.write_text(f"# the scratch files\n{tmp_path}/a.img  # first\n\n"
                       f"{tmp_path}/b.img {tmp_path}/c.img\n")
    result = _run(tmp_path, fio, "--targets-file", str(listing))
    assert result.returncode == 2
    assert one_line_error(result) == (
        f"Error: --targets-file {listing} line 4: '{tmp_path}/b.img {tmp_path}/c.img' is "
        "not one target: give one per line")
    _untouched(tmp_path, "a.img", "b.img", "c.img")


@pytest.mark.parametrize("content, why", [
    ("--destroy-data\n", "is not a target (a path, one per line)"),
    ("# nothing but a comment\n\n", "names no target"),
])
def test_other_bad_targets_files(tmp_path: Path, fio: str, content: str, why: str) -> None:
    listing = tmp_path / "targets.txt"
    listing.write_text(content)
    result = _run(tmp_path, fio, "--target", str(tmp_path / "a.img"), "--targets-file",
                  str(listing))
    assert result.returncode == 2 and why in one_line_error(result)
    _untouched(tmp_path, "a.img")


def test_a_missing_targets_file(tmp_path: Path, fio: str) -> None:
    result = _run(tmp_path, fio, "--targets-file", str(tmp_path / "none.txt"))
    assert result.returncode == 2
    assert one_line_error(result) == (f"Error: cannot read --targets-file {tmp_path}/none.txt: "
                                      "No such file or directory")


def test_the_same_target_twice_is_refused(tmp_path: Path, fio: str) -> None:
    listing = tmp_path / "targets.txt"
    listing.write_text(f"{tmp_path}/b.img\n{tmp_path}/./a.img\n")
    result = _run(tmp_path, fio, "--target", str(tmp_path / "a.img"), "--targets-file",
                  str(listing))
    assert result.returncode == 2
    assert one_line_error(result) == (f"Error: target {tmp_path}/./a.img is given twice (as "
                                      f"{tmp_path}/a.img); give each target once")
    _untouched(tmp_path, "a.img", "b.img")


def test_destroy_data_naming_no_target_is_refused(tmp_path: Path, fio: str) -> None:
    result = _run(tmp_path, fio, "--target", str(tmp_path / "a.img"), "--target",
                  str(tmp_path / "b.img"), "--destroy-data=/dev/nothing-here")
    assert result.returncode == 2
    assert "--destroy-data names /dev/nothing-here, which is not one of the targets" in (
        one_line_error(result))
    _untouched(tmp_path, "a.img", "b.img")


def test_a_set_takes_no_dir(tmp_path: Path, fio: str) -> None:
    result = ssdlab_in_process("run", "curves", "--target", str(tmp_path / "a.img"),
                               "--target", str(tmp_path / "b.img"), "--dir", str(tmp_path),
                               "--fio", fio, "--store", str(tmp_path / "s.sqlite"))
    assert result.returncode == 2
    assert one_line_error(result) == ("Error: several targets run as a set take --target (or "
                                      "--targets-file) only, not --dir")
    _untouched(tmp_path, "a.img", "b.img")


def test_the_dry_run_of_a_set_shows_each_plan_and_the_merged_first_job(
        tmp_path: Path, fio: str) -> None:
    result = _run(tmp_path, fio, "--target", str(tmp_path / "a.img"), "--target",
                  str(tmp_path / "b.img"), "--dry-run")
    assert result.returncode == 0 and result.stderr == ""
    out = result.stdout
    assert out.startswith("DRY RUN of a set of 2 targets")
    assert f"=== a.img: {tmp_path}/a.img" in out and f"=== b.img: {tmp_path}/b.img" in out
    merged = out.split("=== the merged job file of the set's first fio run:\n")[1]
    assert "[t1.wipc_seq128k_write]\nstonewall\n" in merged
    assert "[t2.wipc_seq128k_write]\nnew_group\n" in merged
    assert "[global]" not in merged
    # each plan says its time, and the set's last line the set's: the runs go at once
    planned = [line for line in out.splitlines() if line.startswith("planned time: ")]
    assert len(planned) == 3 and out.rstrip("\n").splitlines()[-1] == planned[-1]
    assert planned[0] == planned[1]  # the same plan on two targets of one size
    assert planned[2] == f"{planned[0]} (the runs go at once: the longest of them)"
    _untouched(tmp_path, "a.img", "b.img")


def test_targets_of_other_hosts_go_to_the_one_run_that_drives_them(
        tmp_path: Path, fio: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ssdlab.cli import suite_cmd
    asked: list[str | None] = []

    def execute(suite: object, request: Any, *rest: object) -> None:
        asked.append(request.target)

    monkeypatch.setattr(suite_cmd, "execute", execute)
    listing = tmp_path / "targets.txt"
    listing.write_text("node2:/dev/nvme0n1\n")
    result = ssdlab_in_process("run", "pts", "--target", "node1:/dev/nvme0n1",
                               "--targets-file", str(listing), "--fio", fio)
    assert result.returncode == 0, result.stderr
    assert asked == ["node1:/dev/nvme0n1,node2:/dev/nvme0n1"]


def test_one_target_from_a_file_is_a_run_not_a_set(
        tmp_path: Path, fio: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ssdlab.cli import suite_cmd
    asked: list[str | None] = []
    monkeypatch.setattr(suite_cmd, "execute",
                        lambda suite, request, *rest: asked.append(request.target))
    listing = tmp_path / "targets.txt"
    listing.write_text(f"# one\n{tmp_path}/a.img\n")
    result = ssdlab_in_process("run", "pts", "--targets-file", str(listing), "--fio", fio)
    assert result.returncode == 0, result.stderr
    assert asked == [f"{tmp_path}/a.img"]
