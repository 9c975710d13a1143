"""Several hosts, each a guest with its own kernel (issue 33): the coordinator is ssdlab on
this machine, each host a VM lab guest reached by ssh (its forwarded port, its own key:
``VmLab.hosts_env``) where ssdlab's agent runs and serves its fio server, exactly as on
real servers (docs/hosts.md).

- Aggregate truth (item 5): two guests whose NVMe drives are ssdlab emulated SSDs on this
  machine at time scales 1 and 3; one job on both at once with fio's per-I/O
  completion-latency logs on; every aggregate percentile the product computes from the
  merged histograms (p1 to p99.99, p99 and p99.9 among them) equals the merged, sorted
  per-I/O latencies' of the same rank within half a histogram bucket
  (tests/support/aggregate_truth.py). Judged by ranks and counts, never by speed.
- A client powered off mid-run (QMP ``system_reset``: no sync, no shutdown): a quick PTS
  run on both guests stops with one line naming that guest, every completed round of both
  is kept, and ``ssdlab resume`` finishes the run once the guest is back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.run.remote import prepare_remote
from tests.support.aggregate_truth import judge, run_logged
from tests.support.cli import HINTED, one_line_error, ssdlab
from tests.support.stored import check_stored, ok_rounds
from tests.support.vmimage import mounts_under
from tests.support.vmlab import Drive, Guest, VmLab
from tests.vmlab.conftest import VMLAB_TEST_TIMEOUT_S

pytestmark = [pytest.mark.root, pytest.mark.vmlab, pytest.mark.timeout(VMLAB_TEST_TIMEOUT_S)]

#: a quick PTS IOPS test: two cells a round (v1.1 tracks 4 KiB random writes alone)
QUICK_IOPS = ("run", "pts", "--profile", "quick", "--tests", "iops", "--tracking", "v1.1",
              "--block-sizes", "4", "--mixes", "100/0,0/100", "--round-seconds", "0.5",
              "--qd", "4", "--max-rounds", "5", "--destroy-data")
#: each guest's drive: an emulated SSD at this time scale
TIME_SCALES = ("1", "3")
SIZE = "128MiB"


@pytest.fixture(scope="module")
def guests(vmlab: VmLab) -> Iterator[list[Guest]]:
    env = vmlab.emulator_env
    names = [f"host{i + 1}" for i in range(len(TIME_SCALES))]
    started: list[str] = []
    try:
        for name, scale in zip(names, TIME_SCALES, strict=True):
            done = ssdlab("emulator", "start", "--name", name, "--size", SIZE,
                          "--time-scale", scale, env=env)
            assert done.returncode == 0, done.stderr
            started.append(name)
        running = [vmlab.guest([Drive.backed_by(Path(env["SSDLAB_EMU_RUN_DIR"], n, "disk"))])
                   for n in names]
        try:
            yield running
        finally:
            for guest in running:
                guest.stop()
    finally:
        for name in started:
            stopped = ssdlab("emulator", "stop", "--name", name, env=env)
            assert stopped.returncode == 0, stopped.stderr
        assert not mounts_under(vmlab.dir)


def test_aggregate_percentiles_of_two_guests_are_the_merged_logs(
        vmlab: VmLab, guests: list[Guest], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in vmlab.hosts_env(guests).items():
        monkeypatch.setenv(name, value)
    spec = ",".join(f"{g.name}:/dev/nvme0n1" for g in guests)
    _, remote = prepare_remote(spec, True, read_only=False)
    assert [h.hello.hostname for h in remote.hosts] and all(
        h.info.model for h in remote.hosts)  # each guest's agent identified its own drive
    with remote.connected():
        output, logs = run_logged(remote, runtime=4, timeout=300)
    found = judge(output, logs, min_ios=500)
    print(f"p99 per guest {found.host_p99_ns}, aggregate {found.p99_ns:.0f} ns, "
          f"p99.9 {found.p99_9_ns:.0f} ns, I/Os {found.ios}", file=sys.stderr)
    for guest in guests:  # the run left nothing in the guest: no fio, no agent socket
        left = guest.ssh("pgrep -a fio; ls /run/ssdlab-agent 2>/dev/null").stdout
        assert left.strip() == "", (guest.name, left)


def test_a_guest_powered_off_mid_run_then_resumed(
        vmlab: VmLab, guests: list[Guest], tmp_path: Path) -> None:
    env = vmlab.hosts_env(guests)
    store = tmp_path / "results.sqlite"
    targets = ",".join(f"{g.name}:/dev/nvme0n1" for g in guests)
    argv = [sys.executable, "-m", "ssdlab", *QUICK_IOPS, "--target", targets,
            "--store", str(store)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    try:
        deadline = time.monotonic() + 600
        while len(ok_rounds(store)) < 2 and proc.poll() is None:
            assert time.monotonic() < deadline, "no two rounds in time"
            time.sleep(0.2)
        lost = guests[1]
        back_in = lost.power_cycle()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, out + err
    line = one_line_error(subprocess.CompletedProcess(argv, 1, out, err))
    assert line.startswith(f"Error: host {lost.name} "), line
    kept = ok_rounds(store)
    assert len(kept) >= 2 and kept == list(range(1, len(kept) + 1))
    run_id = next(w for w in line.split("`") if w.startswith(HINTED)).split()[-1]
    assert f"`{HINTED} resume {run_id}` goes on" in line
    stopped = check_stored(store, run_id)
    host_rounds = [e.detail for e in stopped.events if e.kind == "host-round"]
    names = sorted(g.name for g in guests)
    assert [sorted(d["hosts"]) for d in host_rounds if d] == [names] * len(kept)
    resumed = ssdlab("resume", run_id, "--store", str(store), "--destroy-data", env=env,
                     timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    final = ok_rounds(store)
    assert final == list(range(1, len(final) + 1)) and len(final) > len(kept)
    assert check_stored(store, run_id).status == "complete"
    print(f"powered off after round {len(kept)}; back in {back_in:.0f} s; "
          f"{len(final)} rounds in all", file=sys.stderr)
