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
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.run.remote import prepare_remote
from tests.support.aggregate_truth import judge, run_logged
from tests.support.cli import ssdlab
from tests.support.vmimage import mounts_under
from tests.support.vmlab import Drive, Guest, VmLab
from tests.vmlab.conftest import VMLAB_TEST_TIMEOUT_S

pytestmark = [pytest.mark.root, pytest.mark.vmlab, pytest.mark.timeout(VMLAB_TEST_TIMEOUT_S)]

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
