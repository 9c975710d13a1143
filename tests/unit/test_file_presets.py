"""The file-system presets (aja, diskfill, smallfiles, copy): their data, plans, option
checks, job files, dry run, and the run's bookkeeping with a fake fio that writes files
(cleanup on success, failure and Ctrl-C; the page cache record)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from ssdlab import presets
from ssdlab.cli.main import build_parser
from ssdlab.engine.parser import parse_fio_output
from ssdlab.engine.runner import FioInterrupted, FioRun, TickFn
from ssdlab.errors import ExitCode, TargetError, UserError
from ssdlab.plan.copysets import frame_format
from ssdlab.plan.file_presets import (
    AjaArgs,
    CopyArgs,
    CopyPhase,
    DiskFillArgs,
    FilePresetArgs,
    FioPhase,
    SmallFilesArgs,
    WaitPhase,
    aja_plan,
    copy_plan,
    diskfill_plan,
    smallfiles_plan,
)
from ssdlab.plan.filejobs import FileJob, render_file_job
from ssdlab.run import file_presets_run as fr
from ssdlab.run.prepare import TargetRequest
from ssdlab.run.progress import Progress
from ssdlab.run.session import RunInterrupted
from ssdlab.store.db import Store
from ssdlab.targets.workdir import DirInfo, DroppedCaches

MIB = 1 << 20
GIB = 1 << 30


# --------------------------------------------------------------------------- data, plans


@pytest.mark.parametrize("name", ["aja", "diskfill", "smallfiles", "copy"])
def test_each_preset_is_data_with_a_version(name: str) -> None:
    data = presets.load(name)
    assert presets.identity(data) == {"preset": name, "preset_version": 1,
                                      "preset_title": data["title"]}
    assert "quick" in data["profiles"] and data["description"]


def test_aja_frames_follow_resolution_and_pixel_format() -> None:
    data = presets.load("aja")
    five_k = frame_format(data, "5K", "yuv10")
    assert (five_k.width, five_k.height) == (5120, 2700)
    assert five_k.raw_bytes == five_k.frame_bytes == 36_864_000  # 8/3 bytes per pixel
    hd = frame_format(data, "1920x1080", "yuv8")
    assert (hd.raw_bytes, hd.frame_bytes) == (1920 * 1080 * 2, 1013 * 4096)  # whole blocks
    rgb12 = frame_format(data, "2048x1080", "rgb12")
    assert rgb12.raw_bytes == 2048 * 1080 * 9 // 2 and rgb12.frame_bytes % 4096 == 0
    assert rgb12.frame_bytes - rgb12.raw_bytes < 4096
    plan = aja_plan(AjaArgs())
    sizes = plan.options["file_sizes_bytes"]
    assert sizes == [256 * MIB, 512 * MIB, GIB, 4 * GIB, 16 * GIB, 64 * GIB]
    phases = [p for p in plan.phases if isinstance(p, FioPhase)]
    assert [p.key for p in phases[:2]] == ["write-256MiB", "read-256MiB"]
    gib = next(p for p in phases if p.key == "write-1GiB")
    assert gib.frames == GIB // 36_864_000 == 29
    assert gib.job.block_bytes == 36_864_000 and gib.job.io_bytes == 29 * 36_864_000
    assert all(p.job.direct and not p.drop_before for p in phases)
    assert plan.needed_bytes >= 64 * GIB and not plan.quick
    decimal = aja_plan(AjaArgs(size="1GB"))  # whole frames: any file size holds some
    assert decimal.options["file_sizes_bytes"] == [10**9]
    assert next(p for p in decimal.phases if isinstance(p, FioPhase)).frames == 27


def test_buffered_plan_drops_caches_before_reads() -> None:
    plan = aja_plan(AjaArgs(profile="quick")).buffered()
    for phase in plan.phases:
        if isinstance(phase, FioPhase):
            assert not phase.job.direct
            assert phase.drop_before is (phase.job.rw == "read")


def test_diskfill_plan_writes_every_pass_then_reads_every_file() -> None:
    plan = diskfill_plan(DiskFillArgs())
    phases = [p for p in plan.phases if isinstance(p, FioPhase)]
    assert [p.key for p in phases] == [f"write-{n}" for n in range(1, 11)] + [
        f"read-{n}" for n in range(1, 11)]
    assert {p.job.file_bytes for p in phases} == {GIB}
    assert len({p.job.prefix for p in phases}) == 10
    assert all(p.drop_before == (p.job.rw == "read") and not p.job.direct for p in phases)
    assert plan.needed_bytes > 10 * GIB
    quick = diskfill_plan(DiskFillArgs(profile="quick", passes=2))
    assert quick.quick and quick.options["passes"] == 2
    assert quick.options["file_size_bytes"] == 16 * MIB


def test_smallfiles_plan_is_write_wait_read() -> None:
    plan = smallfiles_plan(SmallFilesArgs())
    write, wait, read = plan.phases
    assert isinstance(write, FioPhase) and isinstance(wait, WaitPhase)
    assert isinstance(read, FioPhase)
    assert write.job.files == 4096 and write.job.file_bytes == write.job.block_bytes == 256 * 1024
    assert wait.seconds == 300.0 and read.drop_before and not write.drop_before
    assert read.job.prefix == write.job.prefix and read.job.rw == "read"
    assert smallfiles_plan(SmallFilesArgs(profile="quick")).options["wait_seconds"] == 1.0


def test_copy_sets_are_100_gib_and_scale_by_size_or_count() -> None:
    plan = copy_plan(CopyArgs())
    sets = {s["name"]: s for s in plan.options["sets"]}
    assert [(s["files"], s["file_bytes"]) for s in sets.values()] == [
        (100, GIB), (10, 10 * GIB), (1, 100 * GIB), (102400, MIB)]
    assert {s["total_bytes"] for s in sets.values()} == {100 * GIB}
    copies = [p for p in plan.phases if isinstance(p, CopyPhase)]
    assert len(copies) == 12 and {p.repetition for p in copies} == {1, 2, 3}
    assert plan.needed_bytes >= 200 * GIB  # a source and its copy
    small = copy_plan(CopyArgs(size=GIB, sets="102400x1MiB,100x1GiB", repetitions=1))
    assert [(s["name"], s["files"], s["file_bytes"]) for s in small.options["sets"]] == [
        ("100x1GiB", 100, 2621 * 4096), ("102400x1MiB", 1024, MIB)]
    sources = [p for p in small.phases if isinstance(p, FioPhase)]
    assert all(not p.measured and p.job.file_bytes % p.job.block_bytes == 0 for p in sources)


@pytest.mark.parametrize(("build", "needle"), [
    (lambda: aja_plan(AjaArgs(resolution="5120by2700")), "--resolution '5120by2700'"),
    (lambda: aja_plan(AjaArgs(resolution="0x10")), "--resolution '0x10'"),
    (lambda: aja_plan(AjaArgs(pixel_format="yuv12")), "--pixel-format 'yuv12' is not one of"),
    (lambda: aja_plan(AjaArgs(size="16MiB")), "holds no 35.16 MiB frame"),
    (lambda: aja_plan(AjaArgs(size="1GiB,1GiB")), "a file size is given twice"),
    (lambda: aja_plan(AjaArgs(size="1k")), "--size '1k': give 4 KiB to"),
    (lambda: aja_plan(AjaArgs(size=",")), "give one to 32 file sizes"),
    (lambda: aja_plan(AjaArgs(size="1 parsec")), "--size '1 parsec'"),
    (lambda: aja_plan(AjaArgs(profile="slow")), "--profile 'slow' is not one of"),
    (lambda: diskfill_plan(DiskFillArgs(passes=0)), "--passes 0: give a whole number"),
    (lambda: diskfill_plan(DiskFillArgs(size=3 * MIB // 2)), "multiple of 1 MiB"),
    (lambda: diskfill_plan(DiskFillArgs(block_size="1k")), "--block-size '1k': give 4 KiB"),
    (lambda: smallfiles_plan(SmallFilesArgs(wait_seconds=float("nan"))), "--wait-seconds nan"),
    (lambda: smallfiles_plan(SmallFilesArgs(wait_seconds=-1.0)), "give 0 to 86400"),
    (lambda: smallfiles_plan(SmallFilesArgs(size=MIB, file_size="2MiB")), "--size 1048576"),
    (lambda: smallfiles_plan(SmallFilesArgs(size=1 << 45, file_size="4k")),
     "more than 10,000,000"),
    (lambda: copy_plan(CopyArgs(sets="1x1GiB")), "--sets '1x1GiB': give set names"),
    (lambda: copy_plan(CopyArgs(sets="10x10GiB,10x10GiB")), "without repeats"),
    (lambda: copy_plan(CopyArgs(repetitions=0)), "--repetitions 0"),
    (lambda: copy_plan(CopyArgs(size=1 << 46)), "more than 10,000,000"),
])
def test_bad_options_are_one_line_usage_errors(build: Any, needle: str) -> None:
    with pytest.raises(UserError) as info:
        build()
    assert info.value.exit_code is ExitCode.USAGE
    assert needle in info.value.message and "\n" not in info.value.message


# --------------------------------------------------------------------------- job files


def test_write_job_creates_and_syncs_each_file_read_job_only_reads() -> None:
    job = FileJob("w", "files", "small", "write", 4096, 8192, 3, False)
    text = render_file_job(job, "/d/ssdlab-work-x", "head\nline")
    assert text.startswith("; head\n; line\n[w]\n")
    for line in ("directory=/d/ssdlab-work-x/files", "filename_format=small.$filenum",
                 "nrfiles=3", "filesize=8192", "bs=4096", "direct=0", "rw=write",
                 "create_on_open=1", "fallocate=none", "fsync_on_close=1", "end_fsync=1",
                 "openfiles=1", "file_service_type=sequential", "iodepth=1"):
        assert line in text.splitlines(), line
    read = render_file_job(dataclasses.replace(job, rw="read", direct=True), "/d")
    assert "rw=read" in read and "direct=1" in read and "directory=/d/files" in read
    assert "fsync" not in read and "create_on_open" not in read
    assert job.paths("/b") == ["/b/files/small.0", "/b/files/small.1", "/b/files/small.2"]
    with pytest.raises(ValueError):
        FileJob("w", "", "f", "write", 4096, 6000, 1, False)


# --------------------------------------------------------------------------- CLI


def _cli(argv: list[str]) -> str:
    args = build_parser().parse_args(argv)
    out = io.StringIO()
    with redirect_stdout(out):
        assert args.func(args, argv) == 0
    return out.getvalue()


@pytest.mark.parametrize("suite", ["aja", "diskfill", "smallfiles", "copy"])
@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_dry_run_prints_plan_and_job_files_and_touches_nothing(suite: str,
                                                               tmp_path: Path) -> None:
    text = _cli(["run", suite, "--dir", str(tmp_path), "--profile", "quick", "--dry-run"])
    assert text.startswith("DRY RUN: nothing will be written.")
    assert f"(preset {suite} v1), profile quick (QUICK)" in text
    assert "page cache:" in text and f"directory {tmp_path}:" in text
    assert text.count("[") >= 2 and "filename_format=" in text
    assert os.listdir(tmp_path) == []


def test_the_directory_must_exist_and_have_room(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="not a directory"):
        _cli(["run", "diskfill", "--dir", str(tmp_path / "nope"), "--dry-run"])
    with pytest.raises(UserError, match="--dir DIR is required"):
        _cli(["run", "copy", "--profile", "quick", "--dry-run"])
    huge = DiskFillArgs(profile="quick", size=1 << 50)  # three 1 PiB files
    assert diskfill_plan(huge).needed_bytes > 1 << 51
    with pytest.raises(TargetError, match="needed"):
        fr.prepare_files(TargetRequest(None, str(tmp_path)), huge)


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_target_is_an_alias_of_dir(tmp_path: Path) -> None:
    text = _cli(["run", "smallfiles", "--target", str(tmp_path), "--dry-run"])
    assert "4,096 files of 256KiB" in text and "wait 300 s" in text


# --------------------------------------------------------------------------- the run


class FileFakeFio:
    """Writes the files a write job names (reads check they exist) and reports the bytes,
    as fio would; ``fail_at``/``interrupt_at`` (1-based calls) fail or press Ctrl-C."""

    def __init__(self, fail_at: int = 0, interrupt_at: int = 0) -> None:
        self.calls: list[str] = []
        self.fail_at, self.interrupt_at = fail_at, interrupt_at

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        self.calls.append(job_text)
        n = len(self.calls)
        if n == self.interrupt_at:
            raise FioInterrupted()
        opts = dict(line.split("=", 1) for line in job_text.splitlines() if "=" in line
                    and not line.startswith(";"))
        now = time.time()
        if n == self.fail_at:
            return FioRun(job_text, ("fake",), "", "EIO", 1, now, now, False, None,
                          "fio exited with status 1: EIO")
        files, size = int(opts["nrfiles"]), int(opts["filesize"])
        folder = Path(opts["directory"])
        prefix = opts["filename_format"].split(".$")[0]
        for i in range(files):
            path = folder / f"{prefix}.{i}"
            if opts["rw"] == "write":
                path.write_bytes(b"\0" * size)
            assert path.stat().st_size == size
        total = files * size
        ios = total // int(opts["bs"])
        direction, empty = _direction(total, ios, 1000.0), _direction(0, 0, 0.0)
        job = {"jobname": job_text.split("[", 1)[1].split("]", 1)[0], "groupid": 0, "error": 0,
               "read": direction if opts["rw"] == "read" else empty,
               "write": direction if opts["rw"] == "write" else empty,
               "trim": empty, "job_runtime": 100, "usr_cpu": 1.0, "sys_cpu": 1.0}
        stdout = json.dumps({"fio version": "fio-3.33", "jobs": [job]})
        return FioRun(job_text, ("fake",), stdout, "", 0, now, now, False,
                      parse_fio_output(stdout), None)


def _direction(total: int, ios: int, lat_ns: float) -> dict[str, object]:
    stats = {"min": lat_ns, "max": lat_ns, "mean": lat_ns, "stddev": 0.0, "N": ios}
    return {"io_bytes": total, "bw_bytes": total * 10, "iops": ios * 10.0,
            "runtime": 100 if ios else 0, "total_ios": ios, "short_ios": 0, "drop_ios": 0,
            "slat_ns": stats, "clat_ns": stats, "lat_ns": stats}


@pytest.fixture
def no_drop(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The machine's caches are not dropped by unit tests: a stand-in records the calls."""
    calls: list[int] = []

    def fake() -> DroppedCaches:
        calls.append(1)
        return DroppedCaches(True, False, "unit test")

    monkeypatch.setattr(fr, "drop_caches", fake)
    return calls


def _run(tmp_path: Path, args: FilePresetArgs, fio: FileFakeFio) -> tuple[Store, str | None]:
    folder = tmp_path / "dir"
    folder.mkdir(exist_ok=True)
    prepared = fr.prepare_files(TargetRequest(None, str(folder)), args)
    store = Store.open(tmp_path / "results.sqlite")
    runner = fr.FilePresetRun(prepared, store, fio, Progress(io.StringIO()))
    try:
        return store, runner.execute(["run"])
    except RunInterrupted:
        return store, runner.run_id


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_run_records_every_phase_and_removes_its_files(tmp_path: Path,
                                                       no_drop: list[int]) -> None:
    args = SmallFilesArgs(profile="quick", size=MIB, wait_seconds=0.0)
    store, run_id = _run(tmp_path, args, FileFakeFio())
    assert run_id is not None and os.listdir(tmp_path / "dir") == []
    run = store.load(run_id)
    assert run.status == "complete" and run.suite == "smallfiles" and run.quick
    assert run.target["fs_type"] and run.target["preset_version"] == 1
    test = run.test("smallfiles")
    assert test.status == "complete" and test.params["preset"] == "smallfiles"
    write, read = (r.cells[0] for r in test.rounds)
    assert write["bw_bytes_per_s"] == MIB / 0.1 and write["files"] == 4
    assert write["cache"]["dropped"] is False and "fsync" in write["fsync"]
    assert read["cache"] == {"direct": False, "synced": True, "dropped": False,
                             "why": "unit test"}
    assert len(no_drop) == 1 and test.result["cleanup"]["removed"] is True
    assert test.result["message"] == "write: 10.5 MB/s; read: 10.5 MB/s"
    events = [e for e in run.events if "caches not dropped" in e.message]
    assert events


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_copy_run_times_cp_and_averages(tmp_path: Path, no_drop: list[int]) -> None:
    args = CopyArgs(profile="quick", size=MIB, sets="100x1GiB,1x100GiB")
    store, run_id = _run(tmp_path, args, FileFakeFio())
    assert run_id is not None and os.listdir(tmp_path / "dir") == []
    test = store.load(run_id).test("copy")
    cells = [r.cells[0] for r in test.rounds]
    assert [c["cell"] for c in cells] == ["copy-100x1GiB-1", "copy-100x1GiB-2",
                                          "copy-1x100GiB-1", "copy-1x100GiB-2"]
    assert all(c["bw_bytes_per_s"] > 0 and c["io_bytes"] == c["files"] * c["file_bytes"]
               for c in cells)
    assert cells[0]["files"] == 100 and cells[0]["command"] == "cp -r --reflink=never"
    summary = {s["group"]: s for s in test.result["summary"]}
    assert summary["100x1GiB"]["count"] == 2 and len(no_drop) == 4


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_a_failed_phase_fails_the_test_and_still_cleans_up(tmp_path: Path,
                                                           no_drop: list[int]) -> None:
    store, run_id = _run(tmp_path, DiskFillArgs(profile="quick"), FileFakeFio(fail_at=2))
    assert run_id is not None and os.listdir(tmp_path / "dir") == []
    run = store.load(run_id)
    test = run.test("diskfill")
    assert run.status == "complete" and test.status == "failed"
    assert "EIO" in test.result["error"] and test.result["cleanup"]["removed"] is True
    assert list(test.result) == ["error", "cleanup"]  # as stored before results were typed
    assert [r.status for r in test.rounds] == ["ok", "failed"]


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_ctrl_c_marks_the_run_interrupted_and_cleans_up(tmp_path: Path,
                                                        no_drop: list[int]) -> None:
    store, run_id = _run(tmp_path, AjaArgs(profile="quick"), FileFakeFio(interrupt_at=3))
    assert run_id and os.listdir(tmp_path / "dir") == []
    run = store.load(run_id)
    assert run.status == "interrupted" and len(run.test("aja").rounds) == 2
    assert run.test("aja").result["cleanup"]["removed"] is True


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_direct_io_refused_falls_back_to_buffered_and_says_so(
        tmp_path: Path, no_drop: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fr, "direct_refused", lambda folder: "EINVAL")
    store, run_id = _run(tmp_path, AjaArgs(profile="quick"), FileFakeFio())
    assert run_id is not None
    test = store.load(run_id).test("aja")
    caches = [r.cells[0]["cache"] for r in test.rounds]
    assert [c.get("direct") for c in caches] == [False] * 4
    assert len(no_drop) == 2 and re.search("O_DIRECT refused", test.result["notes"][0])


def test_drop_cache_record_says_when_files_are_in_ram(no_drop: list[int]) -> None:
    info = DirInfo("/dev/shm/x", "tmpfs", "tmpfs", "/dev/shm", False, 1 << 30)
    assert "RAM" in str(fr.drop_cache_record(info).note)
    assert "note" not in fr.drop_cache_record(
        dataclasses.replace(info, fs_type="ext4")).to_json()


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_report_shows_each_run_and_compares_runs_of_a_preset(tmp_path: Path,
                                                             no_drop: list[int]) -> None:
    from ssdlab.report.build import render

    args = SmallFilesArgs(profile="quick", size=MIB, wait_seconds=0.0)
    store, first = _run(tmp_path, args, FileFakeFio())
    _, second = _run(tmp_path, args, FileFakeFio())
    _, failed = _run(tmp_path, DiskFillArgs(profile="quick"), FileFakeFio(fail_at=1))
    runs = [store.load(r) for r in (first, second, failed) if r is not None]
    html, _ = render(runs)
    assert html.count("<h2>Small files (dd-like)</h2>") == 2
    assert "<h2>DiskFill-like file passes</h2>" in html and "no phase was measured" in html
    assert 'id="cmp-smallfiles"' in html or "cmp-smallfiles" in html
    # the four suites share one overlay: the comparison shows it once
    assert html.count("<h3>Small files (dd-like)</h3>") == 1
    assert "smallfiles version 1" in html and "removed" in html
