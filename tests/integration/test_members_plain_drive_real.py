"""Member figures only where members exist (issue 30), with real fio: on a single emulated
SSD (a loop device over the emulator's file) every suite that runs through the shared
skeleton, which samples the members of every target, has no write penalty line in its
run output, ``ssdlab show``, the report or the export. Before, the PTS 1024 KiB test
printed "write penalty 1.79" there and ``run peak`` 1.50 and 1.52: one device is not an
array. Each run stores one ``members-off`` event saying the target is a plain drive, and
no ``members`` event. Then the file presets (their own run, the same member sampling) in
a directory of an ext4 file system on the same drive. (The RAID matrix needs arrays and
the database suite its servers; their member sampling is the same call, covered here
through every other suite.)"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from ssdlab.targets import emulator
from tests.support.cli import ssdlab_in_process

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1024 * 1024
SAMPLE = str(Path(__file__).resolve().parents[1] / "data" / "replay-sample.iolog")
#: each suite at its shortest; those with a warm-up (ramp_time) among them
SUITES: dict[str, tuple[str, ...]] = {
    "pts": ("--profile", "quick", "--tests", "throughput", "--round-seconds", "0.1",
            "--max-rounds", "5", "--block-sizes", "1024", "--purge", "none",
            "--no-precondition"),
    "peak": ("--profile", "quick", "--workloads", "rnd4k_write,seq128k_write",
             "--probe-seconds", "0.3", "--ramp-seconds", "0.2", "--engines", "io_uring",
             "--max-threads", "2", "--max-qd", "4", "--max-probes", "4", "--pin", "none"),
    "latency-iops": ("--profile", "quick", "--block-sizes", "4", "--mixes", "0/100",
                     "--threads", "1", "--qd", "1,4", "--full-ladder", "--warmup-seconds",
                     "0.2", "--measure-seconds", "0.3", "--no-precondition", "--purge",
                     "none"),
    "curves": ("--profile", "quick", "--workload", "4k-random-read", "--jobs", "1",
               "--seconds", "0.3", "--ramp", "0.2", "--fill-region", "50"),
    "cdm": ("--profile", "quick", "--modes", "read,write", "--measure-seconds", "0.3",
            "--size", "32MiB"),
    "atto": ("--profile", "quick", "--min-size", "64KiB", "--max-size", "1MiB",
             "--measure-seconds", "0.2", "--size", "16MiB"),
    "iometer": ("--profile", "quick", "--set", "controller", "--seconds", "0.5",
                "--log-interval", "100", "--size", "16MiB"),
    "saturation": ("--profile", "quick", "--max-rounds", "3", "--round-seconds", "0.2",
                   "--no-hir"),
    "slc-probe": ("--write-size", "32MiB", "--settle", "0"),
    "verify": ("--active-range", "50"),
    "replay": ("--trace", SAMPLE, "--no-stall", "--qd", "8"),
}


#: the file presets, on a file system on the same drive
ON_A_DIR: dict[str, tuple[str, ...]] = {
    "aja": ("--profile", "quick", "--size", "8MiB,16MiB"),
    "diskfill": ("--profile", "quick", "--size", "4MiB", "--passes", "2"),
    "smallfiles": ("--profile", "quick", "--size", "4MiB", "--wait-seconds", "0.2"),
    "copy": ("--profile", "quick", "--size", "4MiB", "--repetitions", "2"),
}


def _no_member_figures(suite: str, argv: tuple[str, ...], store: str, out: Path,
                       off: str) -> None:
    """Run ``suite``; its output, ``show``, export and report have no write penalty and no
    members page, and its one ``members-off`` event says ``off``."""
    started = time.monotonic()
    done = ssdlab_in_process("run", suite, *argv, "--store", store)
    print(f"{suite}: exit {done.returncode} in {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    run_id = re.search(r"^run (\S+) complete", done.stdout, re.M)
    assert run_id, done.stdout[-2000:]
    shown = ssdlab_in_process("show", run_id.group(1), "--store", store)
    exported = ssdlab_in_process("export", run_id.group(1), "--format", "json", "--store",
                                 store)
    report = ssdlab_in_process("report", run_id.group(1), "-o", str(out), "--no-pdf",
                               "--store", store)
    assert shown.returncode == exported.returncode == report.returncode == 0
    page = "".join(p.read_text() for p in out.rglob("*.html"))
    for what, text in (("run", done.stdout), ("show", shown.stdout),
                       ("export", exported.stdout), ("report", page)):
        assert "write penalty" not in text.lower(), (suite, what)
        assert "Members:" not in text, (suite, what)
    events = json.loads(exported.stdout)["events"]
    assert not [e for e in events if e["kind"] == "members"], suite
    assert [e["message"] for e in events if e["kind"] == "members-off"] == [off], suite


def test_no_write_penalty_on_a_single_emulated_ssd(emu_run_dir: Path, tmp_path: Path
                                                    ) -> None:
    emu = emulator.start("plain", "enterprise-tlc", 128 * MIB, loop=True)
    device = emu.loop_device
    assert device is not None
    store = str(tmp_path / "results.sqlite")
    alone = f"one device below it, {Path(device).name}, and no array): no members to compare"
    for suite, options in SUITES.items():
        _no_member_figures(suite, ("--target", device, "--destroy-data", *options), store,
                           tmp_path / suite,
                           f"member devices not sampled: {device} is a plain drive ({alone}")
    # a file system on the same drive: the file presets through their own run
    subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", device, str(mount)], check=True, capture_output=True)
    try:
        for suite, options in ON_A_DIR.items():
            _no_member_figures(suite, ("--dir", str(mount), *options), store,
                               tmp_path / suite, f"member devices not sampled: {mount} is "
                               f"on a plain drive ({alone}")
    finally:
        subprocess.run(["umount", str(mount)], check=True, capture_output=True)
