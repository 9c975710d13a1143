"""The file-system presets (aja, diskfill, smallfiles, copy) with real fio, in quick and
tinier form, in a directory on tmpfs, on ext4 over a loop device and on ext4 over the
emulated SSD: every phase measures MB/s > 0, the page cache handling is recorded, and
nothing is left in the directory afterwards, also after Ctrl-C; the report shows each."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ssdlab.cli.main import build_parser
from ssdlab.report.build import render
from ssdlab.report.terminal import render_run
from ssdlab.store.db import Store
from ssdlab.targets import emulator

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20
TINY: dict[str, tuple[str, ...]] = {
    "aja": ("--size", "8MiB,16MiB"),
    "diskfill": ("--size", "4MiB", "--passes", "2"),
    "smallfiles": ("--size", "4MiB", "--wait-seconds", "0.2"),
    "copy": ("--size", "4MiB", "--repetitions", "2"),
}
TITLES = {"aja": "AJA-like video frames", "diskfill": "DiskFill-like file passes",
          "smallfiles": "Small files (dd-like)", "copy": "Copy-like file sets"}


def _ext4(device: str, where: Path) -> Path:
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=1,"
                    "lazy_journal_init=1", device], check=True, capture_output=True)
    where.mkdir()
    subprocess.run(["mount", "-o", "noinit_itable", device, str(where)], check=True,
                   capture_output=True)
    return where


def _umount(where: Path) -> None:
    if subprocess.run(["umount", str(where)], capture_output=True).returncode:
        subprocess.run(["umount", "--lazy", str(where)], capture_output=True)


@pytest.fixture
def directory(request: pytest.FixtureRequest, shm_dir: Path) -> Iterator[Path]:
    """A directory of the kind the test names: tmpfs, ext4 on a loop device, or ext4 on the
    emulated SSD's loop device (made here, unmounted after)."""
    kind = request.param
    if kind == "tmpfs":
        yield shm_dir
        return
    if kind == "ext4-loop":
        loop: Callable[..., str] = request.getfixturevalue("loop_device")
        device = loop(96 * MIB)
    else:
        request.getfixturevalue("emu_run_dir")
        emu = emulator.start("filepresets", "enterprise-tlc", 192 * MIB, loop=True)
        assert emu.loop_device is not None
        device = emu.loop_device
    mount = _ext4(device, shm_dir / "mnt")
    try:
        yield mount
    finally:
        _umount(mount)


def run_suite(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``ssdlab run ...`` in this process; the run id it printed."""
    args = build_parser().parse_args(argv)
    assert args.func(args, argv) == 0
    out = capsys.readouterr().out
    match = re.search(r"^run (\S+) complete", out, re.M)
    assert match, out
    return match.group(1)


@pytest.mark.parametrize("directory", ["tmpfs", "ext4-loop", "emulated"], indirect=True)
def test_each_preset_runs_measures_and_leaves_nothing(
    directory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "results.sqlite"
    (directory / "keep.txt").write_text("the user's file\n")
    before = sorted(os.listdir(directory))
    fs_type = "tmpfs" if directory.name != "mnt" else "ext4"
    runs = {}
    for preset, extra in TINY.items():
        started = time.monotonic()
        runs[preset] = run_suite(["run", preset, "--dir", str(directory), "--profile", "quick",
                                  "--store", str(store_path), *extra], capsys)
        assert sorted(os.listdir(directory)) == before, preset
        print(f"{fs_type} {preset}: {time.monotonic() - started:.2f} s")
    assert (directory / "keep.txt").read_text() == "the user's file\n"
    with Store.open(store_path) as store:
        for preset, run_id in runs.items():
            run = store.load(run_id)
            assert run.status == "complete" and run.quick
            assert run.target["fs_type"] == fs_type and run.target["network_share"] is False
            assert (run.target["preset"], run.target["preset_version"]) == (preset, 1)
            test = run.test(preset)
            assert test.status == "complete", test.result
            assert test.result["cleanup"]["removed"] is True
            cells = [c for r in test.rounds for c in r.cells]
            assert cells and all(r.status == "ok" for r in test.rounds)
            for cell in cells:
                assert cell["bw_bytes_per_s"] > 0 and cell["seconds"] > 0, cell
                cache = cell["cache"]
                if preset == "aja":
                    assert cache == {"direct": True} and cell["frames_per_s"] > 0
                elif cell["direction"] in ("read", "copy"):
                    assert cache["synced"] is True and cache["dropped"] is True, cache
                else:
                    assert cache["dropped"] is False and cell["fsync"], cell
                print(f"  {preset} {cell['label']}: {cell['bw_bytes_per_s'] / 1e6:,.1f} MB/s")
            directions = {c["direction"] for c in cells}
            assert directions == ({"copy"} if preset == "copy" else {"write", "read"})
        if fs_type == "tmpfs":
            html, _ = render([store.load(r) for r in runs.values()])
            for preset, title in TITLES.items():
                assert f"<h2>{title}</h2>" in html, preset
            assert "frames/s" in html and "caches dropped" in html and "Averages" in html
            shown = render_run(store.load(runs["diskfill"]))
            assert "preset diskfill v1" in shown and "MB/s" in shown and "pass 1" in shown


def test_ctrl_c_removes_the_work_directory(shm_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ssdlab", "run", "smallfiles", "--dir", str(shm_dir),
         "--profile", "quick", "--size", "4MiB", "--wait-seconds", "60", "--store",
         str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    work: list[str] = []
    while time.monotonic() < deadline and proc.poll() is None:
        work = [n for n in os.listdir(shm_dir) if n.startswith("ssdlab-work-")]
        if work and os.path.isdir(shm_dir / work[0] / "files") and len(
                os.listdir(shm_dir / work[0] / "files")) == 16:
            break
        time.sleep(0.05)
    assert work, "the run never made its work directory"
    time.sleep(0.3)  # into the wait
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "work directory was removed" in err
    assert os.listdir(shm_dir) == []
    with Store.open(store) as s:
        run_id = re.search(r"run (\S+):", out)
        assert run_id, out
        run = s.load(run_id.group(1))
        assert run.status == "interrupted"
        assert run.test("smallfiles").result["cleanup"]["removed"] is True


