"""fio job-file text from specs: pure rendering, and real fio accepting and running it."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ssdlab.engine.jobfile import render
from ssdlab.engine.parser import parse_fio_output
from ssdlab.plan.pts import PtsArgs, build_options, build_pts_tests
from ssdlab.plan.specs import CellSpec, FioJob, Mix, Pattern, active_range
from ssdlab.units import fio_time

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

Section = tuple[str, list[str], dict[str, str]]


def sections(text: str) -> list[Section]:
    """(name, bare flag lines, key=value options) of every section, in order."""
    out: list[Section] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(";"):
            continue
        if line.startswith("[") and line.endswith("]"):
            out.append((line[1:-1], [], {}))
            continue
        assert out, f"option outside a section: {line!r}"
        name, flags, options = out[-1]
        if "=" in line:
            key, value = line.split("=", 1)
            assert key not in options, f"{key} set twice in [{name}]"
            options[key] = value
        else:
            flags.append(line)
    return out


def cell_sections(text: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    parsed = sections(text)
    assert parsed[0][0] == "global"
    return {name: (flags, options) for name, flags, options in parsed[1:]}


def expected_rw(pattern: Pattern, read_pct: int) -> str:
    if pattern is Pattern.RANDOM:
        return {100: "randread", 0: "randwrite"}.get(read_pct, "randrw")
    return {100: "read", 0: "write"}.get(read_pct, "rw")


def cell(
    name: str = "c",
    pattern: Pattern = Pattern.RANDOM,
    block: int = 4 * KIB,
    read_pct: int = 100,
    threads: int = 1,
    iodepth: int = 1,
    offset: int = 0,
    size: int = GIB,
    runtime: float | None = 1.0,
    io_bytes: int | None = None,
    ramp: float = 0.0,
) -> CellSpec:
    return CellSpec(
        name=name,
        pattern=pattern,
        block_bytes=block,
        mix=Mix(read_pct),
        threads=threads,
        iodepth=iodepth,
        offset_bytes=offset,
        size_bytes=size,
        runtime_s=runtime,
        ramp_s=ramp,
        io_bytes=io_bytes,
    )


def default_plan_jobs(target: str, capacity: int = GIB, threads: int = 16) -> list[FioJob]:
    """The job files of a full default PTS plan: WIPC and one round of every test."""
    opts = build_options(PtsArgs(threads=threads), "nvme", 64)
    jobs: list[FioJob] = []
    for test in build_pts_tests(opts, capacity, 512):
        assert test.wipc is not None
        jobs.append(FioJob(target, (test.wipc,), ioengine=opts.ioengine))
        jobs.append(FioJob(target, test.round_cells, ioengine=opts.ioengine))
    return jobs


def check_cell_section(spec: CellSpec, flags: list[str], opts: dict[str, str]) -> None:
    assert flags == ["stonewall"]
    assert opts["rw"] == expected_rw(spec.pattern, spec.mix.read_pct)
    if 0 < spec.mix.read_pct < 100:
        assert opts["rwmixread"] == str(spec.mix.read_pct)
    else:
        assert "rwmixread" not in opts
    assert opts["bs"] == str(spec.block_bytes)
    assert opts["numjobs"] == str(spec.threads)
    assert opts["iodepth"] == str(spec.iodepth)
    # every thread's region lies inside the active range; sequential threads don't overlap
    start, end = spec.offset_bytes, spec.offset_bytes + spec.size_bytes
    offset, size = int(opts["offset"]), int(opts["size"])
    assert size > 0, "size=0 makes fio use the whole file"
    increment = int(opts.get("offset_increment", "0"))
    slices = [(offset + i * increment, offset + i * increment + size) for i in range(spec.threads)]
    for lo, hi in slices:
        assert start <= lo < hi <= end
    if spec.pattern is Pattern.SEQUENTIAL and spec.threads > 1:
        assert size % spec.block_bytes == 0
        assert size >= spec.block_bytes
        for (_, hi), (lo, _) in itertools.pairwise(slices):
            assert hi <= lo
    else:
        assert "offset_increment" not in opts
        assert (offset, size) == (spec.offset_bytes, spec.size_bytes)
    if spec.runtime_s is not None:
        assert opts["time_based"] == "1"
        assert opts["runtime"] == fio_time(spec.runtime_s)
        assert "io_size" not in opts
    else:
        assert spec.io_bytes is not None
        assert "time_based" not in opts and "runtime" not in opts
        assert int(opts["io_size"]) == spec.io_bytes // spec.threads


# --------------------------------------------------------------------------- fio_time


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.5, "500ms"),
        (60, "60s"),
        (60.0, "60s"),
        (1, "1s"),
        (0.2, "200ms"),
        (1.25, "1250ms"),
        (0.001, "1ms"),
        (3600, "3600s"),
    ],
)
def test_fio_time(seconds: float, text: str) -> None:
    assert fio_time(seconds) == text


@pytest.mark.parametrize("seconds", [0, -1, 0.0004])
def test_fio_time_refuses_durations_below_a_millisecond(seconds: float) -> None:
    with pytest.raises(ValueError):
        fio_time(seconds)


# --------------------------------------------------------------------------- render


def test_render_is_pure() -> None:
    jobs = default_plan_jobs("/dev/fake")
    again = default_plan_jobs("/dev/fake")
    for job, twin in zip(jobs, again, strict=True):
        assert job is not twin
        text = render(job, "header line 1\nline 2")
        assert render(job, "header line 1\nline 2") == text
        assert render(twin, "header line 1\nline 2") == text
    assert render(jobs[1]) != render(jobs[3])


def test_header_becomes_comment_lines() -> None:
    text = render(FioJob("/dev/x", (cell(),)), "ssdlab 0.1\ntarget /dev/x")
    assert text.startswith("; ssdlab 0.1\n; target /dev/x\n[global]\n")
    assert text.endswith("\n")
    assert render(FioJob("/dev/x", (cell(),))).startswith("[global]\n")


def test_global_section() -> None:
    job = FioJob(
        "/dev/nvme9n1",
        (cell(),),
        ioengine="io_uring",
        direct=False,
        extra_global=(("log_avg_msec", "500"),),
    )
    name, flags, opts = sections(render(job))[0]
    assert (name, flags) == ("global", [])
    assert opts["filename"] == "/dev/nvme9n1"
    assert opts["ioengine"] == "io_uring"
    assert opts["direct"] == "0"
    assert opts["group_reporting"] == "1"
    assert opts["percentile_list"] == "50:99:99.9:99.99"
    # total-latency percentiles too: a cell whose submission blocks shows them
    # (docs/consistency.md)
    assert opts["lat_percentiles"] == "1"
    assert opts["thread"] == "1"  # jobs are threads: none outlives a killed fio
    assert opts["log_avg_msec"] == "500"
    assert sections(render(FioJob("/x", (cell(),))))[0][2]["direct"] == "1"


@pytest.mark.parametrize("pattern", list(Pattern))
@pytest.mark.parametrize("read_pct", [100, 95, 70, 65, 50, 5, 0])
def test_rw_and_rwmixread(pattern: Pattern, read_pct: int) -> None:
    spec = cell(pattern=pattern, read_pct=read_pct, threads=1)
    flags, opts = cell_sections(render(FioJob("/x", (spec,))))["c"]
    check_cell_section(spec, flags, opts)
    assert opts["rw"] == expected_rw(pattern, read_pct)
    assert opts.get("rwmixread") == (None if read_pct in (0, 100) else str(read_pct))


def test_cells_keep_their_order_and_names() -> None:
    cells = tuple(cell(name=f"cell{i}", read_pct=r) for i, r in enumerate((0, 100, 50)))
    parsed = sections(render(FioJob("/x", cells)))
    assert [name for name, _, _ in parsed] == ["global", "cell0", "cell1", "cell2"]


def test_every_section_of_the_default_plan() -> None:
    jobs = default_plan_jobs("/dev/fake", capacity=10 * GIB, threads=16)
    rng = active_range(10 * GIB, 100.0)
    seen_rw: set[str] = set()
    for job in jobs:
        parsed = cell_sections(render(job))
        assert list(parsed) == [c.name for c in job.cells]
        for spec in job.cells:
            assert (spec.offset_bytes, spec.size_bytes) == (rng.offset_bytes, rng.size_bytes)
            flags, opts = parsed[spec.name]
            check_cell_section(spec, flags, opts)
            seen_rw.add(opts["rw"])
    assert seen_rw == {"randread", "randwrite", "randrw", "read", "write"}


def test_time_based_cell() -> None:
    spec = cell(runtime=0.5, ramp=2.0)
    flags, opts = cell_sections(render(FioJob("/x", (spec,))))["c"]
    check_cell_section(spec, flags, opts)
    assert (opts["time_based"], opts["runtime"], opts["ramp_time"]) == ("1", "500ms", "2s")
    no_ramp = cell_sections(render(FioJob("/x", (cell(runtime=60),))))["c"][1]
    assert no_ramp["runtime"] == "60s"
    assert "ramp_time" not in no_ramp


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_size_based_cell_divides_io_between_threads(threads: int) -> None:
    spec = cell(
        pattern=Pattern.SEQUENTIAL,
        read_pct=0,
        block=128 * KIB,
        threads=threads,
        runtime=None,
        io_bytes=2 * GIB,
        size=GIB,
    )
    flags, opts = cell_sections(render(FioJob("/x", (spec,))))["c"]
    check_cell_section(spec, flags, opts)
    assert int(opts["io_size"]) == 2 * GIB // threads


@pytest.mark.parametrize(
    ("threads", "block", "offset", "size"),
    [
        (2, MIB, 0, GIB),
        (3, MIB, 0, GIB),  # 341.33 MiB per thread: rounded down to whole blocks
        (16, 128 * KIB, 0, GIB),
        (16, MIB, 4 * MIB, 64 * MIB),
        (7, 128 * KIB, 5 * MIB, 100 * MIB + 4096),
        (64, MIB, 0, 64 * MIB),
    ],
)
def test_sequential_threads_get_disjoint_slices_inside_the_range(
    threads: int, block: int, offset: int, size: int
) -> None:
    spec = cell(
        pattern=Pattern.SEQUENTIAL,
        read_pct=100,
        block=block,
        threads=threads,
        offset=offset,
        size=size,
    )
    flags, opts = cell_sections(render(FioJob("/x", (spec,))))["c"]
    check_cell_section(spec, flags, opts)
    chunk = size // threads // block * block
    assert (int(opts["offset"]), int(opts["size"]), int(opts["offset_increment"])) == (
        offset,
        chunk,
        chunk,
    )


def test_random_threads_share_the_whole_range() -> None:
    spec = cell(pattern=Pattern.RANDOM, read_pct=65, threads=8, offset=MIB, size=GIB)
    flags, opts = cell_sections(render(FioJob("/x", (spec,))))["c"]
    check_cell_section(spec, flags, opts)
    assert (opts["offset"], opts["size"]) == (str(MIB), str(GIB))


def test_more_sequential_threads_than_blocks_is_refused_not_rendered() -> None:
    # reachable: the 64 MiB minimum active range with --threads 128 (<= 256 allowed);
    # run/prepare.py refuses it with a UserError, and render() never writes size=0
    opts = build_options(PtsArgs(threads=128), "nvme", 256)
    test = build_pts_tests(opts, 64 * MIB, 512)[1]
    assert test.name == "throughput-1024k"
    spec = test.round_cells[0]
    with pytest.raises(ValueError, match="128 threads do not fit"):
        render(FioJob("/x", (spec,)))


# --------------------------------------------------------------------------- real fio

FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed")


@pytest.mark.fio
@needs_fio
def test_fio_parses_every_job_file_of_the_default_plan(tmp_path: Path) -> None:
    assert FIO is not None
    target = tmp_path / "target-1GiB.img"
    jobs = default_plan_jobs(str(target), capacity=GIB, threads=16)
    assert len(jobs) == 8
    try:
        for index, job in enumerate(jobs):
            path = tmp_path / f"job{index}.fio"
            path.write_text(render(job, f"job {index}"))
            result = subprocess.run(
                [FIO, "--parse-only", str(path)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert result.returncode == 0, (path.read_text(), result.stdout, result.stderr)
            assert "fio: " not in result.stderr, result.stderr
        assert not target.exists(), "fio --parse-only created the target file"
    finally:
        target.unlink(missing_ok=True)


def _supports_o_direct(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True


@pytest.mark.fio
@needs_fio
def test_fio_runs_a_job_file_with_one_cell_per_rw_kind(tmp_path: Path) -> None:
    assert FIO is not None
    target = tmp_path / "target.img"
    with open(target, "wb") as fh:
        fh.truncate(64 * MIB)
    kinds = [
        # (pattern, block, read share, threads)
        (Pattern.RANDOM, 4 * KIB, 100, 1),
        (Pattern.RANDOM, 4 * KIB, 0, 1),
        (Pattern.RANDOM, 8 * KIB, 70, 1),
        (Pattern.SEQUENTIAL, 64 * KIB, 100, 2),
        (Pattern.SEQUENTIAL, 64 * KIB, 0, 2),
        (Pattern.SEQUENTIAL, 64 * KIB, 50, 1),
    ]
    cells = tuple(
        cell(
            name=f"{expected_rw(p, r)}_bs{b}",
            pattern=p,
            block=b,
            read_pct=r,
            threads=t,
            iodepth=4,
            offset=MIB,
            size=32 * MIB,
            runtime=0.2,
        )
        for p, b, r, t in kinds
    )
    job = FioJob(str(target), cells, direct=_supports_o_direct(target))
    path = tmp_path / "tiny.fio"
    path.write_text(render(job, "tiny real run"))
    result = subprocess.run(
        [FIO, "--output-format=json", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "fio: " not in result.stderr, result.stderr
    output = parse_fio_output(result.stdout)
    assert [j.name for j in output.jobs] == [c.name for c in cells]
    for spec in cells:
        job_result = output.job(spec.name)
        assert job_result.error == 0
        reads, writes = spec.mix.read_pct > 0, spec.mix.read_pct < 100
        for direction, expected in ((job_result.read, reads), (job_result.write, writes)):
            if expected:
                assert direction.total_ios > 0, spec.name
                assert direction.io_bytes > 0 and direction.iops > 0, spec.name
                assert direction.io_bytes % spec.block_bytes == 0, spec.name
            else:
                assert direction.total_ios == 0 and direction.io_bytes == 0, spec.name
        assert job_result.options.get("rw") == spec.fio_rw
        assert job_result.options.get("numjobs") == str(spec.threads)
    assert target.stat().st_size == 64 * MIB  # I/O stayed inside the file
