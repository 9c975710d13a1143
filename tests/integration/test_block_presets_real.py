"""The block-level presets (``ssdlab run cdm``, ``atto``, ``iometer``) with real fio, in
their quick form (further shortened to stay in the suite's time budget), on each kind of
target: a test file in a directory (tmpfs, which takes O_DIRECT; ATTO runs buffered there,
with caches dropped before its reads), a loop device, and the emulated SSD behind a loop
device. Each checks what was stored (real numbers, best >= mean, the per-interval
timeline, the preset's name and version, nothing left in the directory) and that the
report shows each preset's page.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from ssdlab.targets import emulator
from tests.support.cli import ssdlab
from tests.support.stored import check_declared

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20
#: the quick profiles, shortened: fio spends ~0.3 s starting each measurement anyway
PRESETS = {
    "cdm": ("--modes", "read,write", "--measure-seconds", "0.3"),
    "atto": ("--min-size", "4k", "--max-size", "64k", "--measure-seconds", "0.3"),
    "iometer": ("--block-sizes", "4", "--seconds", "0.6", "--log-interval", "200"),
}
PAGES = {"cdm": "CrystalDiskMark-like (cdm v1)", "atto": "ATTO-like (atto v1)",
         "iometer": "IOmeter-like (iometer v1)"}


@pytest.fixture(params=["dir", "loop", "emulator"])
def target(request: pytest.FixtureRequest, shm_dir: Path) -> Iterator[tuple[list[str],
                                                                             dict[str, str]]]:
    """(the target options, the environment) for one kind of target."""
    kind = request.param
    if kind == "dir":
        work = shm_dir / "share"
        work.mkdir()
        yield ["--dir", str(work)], {}
    elif kind == "loop":
        make: Callable[..., str] = request.getfixturevalue("loop_device")
        yield ["--target", make(64 * MIB), "--destroy-data"], {}
    else:
        run_dir: Path = request.getfixturevalue("emu_run_dir")
        emu = emulator.start("presets", "enterprise-tlc", 256 * MIB, loop=True)
        assert emu.loop_device
        yield ["--target", emu.loop_device, "--destroy-data"], {
            "SSDLAB_EMU_RUN_DIR": str(run_dir)}


def _run_id(stdout: str) -> str:
    match = re.search(r"^run (\d{8}-\d{6}-\w{4}) complete", stdout, re.M)
    assert match, stdout
    return match.group(1)


def _check_stored(run: RunData, preset: str) -> None:
    assert run.status == "complete" and run.quick
    assert run.plan["preset"] == preset and run.plan["preset_version"] == 1
    test = run.test(preset)
    assert test.status == "complete", test.result
    print(f"  {run.target_path}: {test.result['message']}")
    assert test.params["preset"] == preset and test.params["preset_version"] == 1
    assert any(s.kind == "prefill" and s.detail["ok"] for s in test.steps)
    rows = test.result["rows"]
    assert rows
    for row in rows:
        best, mean = row["best"], row["mean"]
        for key in ("mb_per_s", "iops", "lat_mean_us"):
            assert best[key] > 0 and mean[key] > 0, row
        assert best["mb_per_s"] >= mean["mb_per_s"] * (1 - 1e-9), row
    cells = [c for r in test.rounds for c in r.cells]
    assert len(cells) == len(test.rounds) == test.params["measurements"]
    if preset == "atto" and not test.params["direct"]:
        reads = [c for c in cells if c["mode"] == "read"]
        assert reads and all(c["caches_dropped"] for c in reads)
        assert len([e for e in run.events if e.kind == "drop-caches"]) == len(reads)
    if preset == "iometer":
        for cell in cells:
            assert cell["timeline"] and all(rate > 0 for _, rate in cell["timeline"]), cell
    check_declared(run)  # every stored document is its declared record


def test_each_preset_runs_quick_and_is_reported(
    target: tuple[list[str], dict[str, str]], shm_dir: Path
) -> None:
    options, env = target
    store = shm_dir / "results.sqlite"
    run_ids = {}
    for preset, extra in PRESETS.items():
        started = time.monotonic()
        # on the directory, ATTO runs buffered: caches are synced and dropped before reads
        buffered = ("--no-direct",) if preset == "atto" and options[0] == "--dir" else ()
        result = ssdlab("run", preset, *options, "--profile", "quick", *extra, *buffered,
                        "--store", str(store), env=env, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        run_ids[preset] = _run_id(result.stdout)
        print(f"{preset} on {options[1]}: {time.monotonic() - started:.1f} s")
        if options[0] == "--dir":
            assert os.listdir(options[1]) == [], "the work directory was not removed"
    with Store.open(store) as opened:
        for preset, run_id in run_ids.items():
            _check_stored(opened.load(run_id), preset)
    out = shm_dir / "report"
    report = ssdlab("report", *run_ids.values(), "-o", str(out), "--no-pdf",
                    "--store", str(store), env=env, timeout=120)
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text()
    for preset, title in PAGES.items():
        assert f"<h2>{title}</h2>" in html, preset
    assert "SEQ1M Q8T1" in html and 'data-chart="hbar"' in html
    assert "4K random read" in html and "IOPS every 200 ms" in html
    assert "QUICK PROFILE" in html
    shown = ssdlab("show", run_ids["cdm"], "--store", str(store), env=env)
    assert shown.returncode == 0 and "preset cdm v1" in shown.stdout
    with Store.open(store) as opened:
        _check_cdm_table(shown.stdout, opened.load(run_ids["cdm"]))
    for preset, run_id in run_ids.items():  # each preset's own words, not the PTS's
        banner = ssdlab("show", run_id, "--store", str(store), env=env).stdout.splitlines()[1]
        assert banner == ("*** QUICK PROFILE: a 16 MiB file and short measurements, for "
                          "demos and tests; not the preset's definition ***"), preset
    listed = ssdlab("runs", "--store", str(store), env=env).stdout.splitlines()
    assert listed[-1] == ("* quick profile: a 16 MiB file and short measurements, for demos "
                          "and tests; not the preset's definition")


def _check_cdm_table(shown: str, run: RunData) -> None:
    """``show`` of a CrystalDiskMark-like run: its four rows with a Read and a Write column,
    the best pass's MB/s and the mean's, as stored."""
    lines = shown.splitlines()
    heads = [i for i, line in enumerate(lines) if line.split()[:1] == ["test"]]
    assert lines[heads[0]].split() == ["test", "Read", "MB/s", "Write", "MB/s"]
    stored = {(r["group"], r["mode"]): r for r in run.test("cdm").result["rows"]}
    groups = ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"]
    for head, figure in zip(heads[:2], ("best", "mean"), strict=True):
        rows = [line.split() for line in lines[head + 2:head + 6]]
        assert [" ".join(row[:2]) for row in rows] == groups
        for group, row in zip(groups, rows, strict=True):
            assert row[2:] == [f"{stored[(group, mode)][figure]['mb_per_s']:,.2f}"
                               for mode in ("read", "write")]
    assert len(heads) == 3  # and four rows in each table, no more:
    assert not lines[heads[2] + 6].strip().startswith(("SEQ", "RND"))


def test_the_other_sets_and_the_mix_mode_run_for_real(shm_dir: Path) -> None:
    """CrystalDiskMark's NVMe set in its mix mode and IOmeter's controller set, with real
    fio on a directory (the suite's main test shortens them away)."""
    work = shm_dir / "share"
    work.mkdir()
    store = str(shm_dir / "results.sqlite")
    cdm = ssdlab("run", "cdm", "--dir", str(work), "--profile", "quick", "--set", "nvme",
                 "--modes", "mix", "--mix-read-pct", "70", "--measure-seconds", "0.3",
                 "--store", store, timeout=120)
    assert cdm.returncode == 0, cdm.stdout + cdm.stderr
    iometer = ssdlab("run", "iometer", "--dir", str(work), "--profile", "quick", "--set",
                     "controller", "--seconds", "0.6", "--log-interval", "200",
                     "--store", store, timeout=120)
    assert iometer.returncode == 0, iometer.stdout + iometer.stderr
    assert os.listdir(work) == []
    with Store.open(Path(store)) as opened:
        cdm_test = opened.load(_run_id(cdm.stdout)).test("cdm")
        io_test = opened.load(_run_id(iometer.stdout)).test("iometer")
    rows = [(r["group"], r["mode"]) for r in cdm_test.result["rows"]]
    assert rows == [(g, "mix") for g in ("SEQ1M Q8T1", "SEQ128K Q32T1", "RND4K Q32T16",
                                         "RND4K Q1T1")]
    for cell in (c for r in cdm_test.rounds for c in r.cells):
        assert cell["read_pct"] == 70 and cell["read_iops"] > 0 and cell["write_iops"] > 0
        # fio's own split of the mix: about 70 % of the I/Os are reads
        assert 0.6 < cell["read_iops"] / cell["iops"] < 0.8, cell
    q32t16 = next(c for r in cdm_test.rounds for c in r.cells if c["group"] == "RND4K Q32T16")
    assert (q32t16["threads"], q32t16["iodepth"]) == (16, 32)
    cells = [c for r in io_test.rounds for c in r.cells]
    assert sorted((c["block_bytes"] // 1024, c["pattern"], c["read_pct"]) for c in cells) == [
        (4, "random", 0), (4, "random", 50), (4, "random", 100),
        (256, "sequential", 0), (256, "sequential", 50), (256, "sequential", 100)]
    for cell in cells:
        assert cell["iops"] > 0 and cell["timeline"]
        if cell["read_pct"] == 50:
            assert cell["read_iops"] > 0 and cell["write_iops"] > 0
