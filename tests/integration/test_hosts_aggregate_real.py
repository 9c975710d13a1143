"""The aggregate of several hosts against the I/O-level truth (issue 33 item 5).

A run on several hosts reads every aggregate latency percentile from the hosts' merged
json+ histograms (engine/aggregate.py). Here two hosts (network namespaces with their own
sshd, tests/support/netlab.py) each drive an emulated SSD, one at the model's time scale 1,
the other at 3, through the product's own agents and forwarded fio servers
(run/remote.py) with fio's per-I/O completion-latency log on. Every I/O of both hosts,
merged and sorted, is the truth; each of the product's aggregate percentiles (p1 to
p99.99, p99 and p99.9 among them) must equal the truth's percentile of the same rank
within :func:`~ssdlab.engine.parser.bin_error_ns` of it (half a histogram bucket: at most
1/128 of the value): tests/support/aggregate_truth.py. The VM lab's version runs on two
guests (tests/vmlab/test_guest_hosts_real.py).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.run.remote import prepare_remote
from tests.support.aggregate_truth import judge, run_logged
from tests.support.cli import ssdlab
from tests.support.netlab import NetLab

pytestmark = [pytest.mark.root, pytest.mark.fio]


@pytest.fixture
def two_hosts(emu_run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Two hosts, h1's emulated SSD at time scale 1, h2's at 3; ssdlab's agents there."""
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}
    devices = []
    for i, scale in enumerate(("1", "3")):
        started = ssdlab("emulator", "start", "--name", f"agg{i + 1}", "--size", "128MiB",
                         "--time-scale", scale, "--loop", env=env)
        assert started.returncode == 0, started.stderr
        devices.append(next(line.split()[-1] for line in started.stdout.splitlines()
                            if "target:" in line))
    with NetLab(2, stranger=False) as net:
        monkeypatch.setenv("SSDLAB_SSH_CONFIG", str(net.ssh_config))
        monkeypatch.setenv("SSDLAB_AGENT_COMMAND",
                           f"env SSDLAB_EMU_RUN_DIR={emu_run_dir} {sys.executable} -m ssdlab")
        yield [f"h{i + 1}:{d}" for i, d in enumerate(devices)]


def test_aggregate_percentiles_are_the_merged_logs_within_the_bin_error(
        two_hosts: list[str]) -> None:
    _, remote = prepare_remote(",".join(two_hosts), True, read_only=False)
    with remote.connected():
        output, logs = run_logged(remote)
    found = judge(output, logs, min_ios=1000)
    print(f"p99 per host {found.host_p99_ns}, aggregate {found.p99_ns:.0f} ns, "
          f"I/Os {found.ios}", file=sys.stderr)
