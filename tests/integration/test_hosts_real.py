"""Several hosts in one run (issue 16 items 2-4) with real ssh, real fio servers and real
emulated SSDs: each host is a network namespace running its own sshd
(tests/support/netlab.py); the coordinator (this test's ``ssdlab``) reaches them only by
ssh with the lab's key.

- a quick PTS IOPS test on three hosts: the aggregate of every stored round is the sum of
  the hosts' IOPS (within 1 %) and its p99 / p99.9 are the percentiles of the hosts'
  merged latency histograms, computed here from fio's raw per-client output;
- without the key nothing starts a fio job on a host, and nothing but sshd listens there;
  an agent refuses a target its own guardrails refuse, whatever the coordinator asks;
- a host killed mid-run: one line naming it, every completed round kept, and ``resume``
  finishes the run once the host is back.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ssdlab.store.db import Store
from ssdlab.targets import emulator
from tests.integration.conftest import only_run_id
from tests.support.browser import open_page
from tests.support.cli import HINTED, one_line_error, ssdlab
from tests.support.netlab import NetLab
from tests.support.stored import check_stored, ok_rounds

pytestmark = [pytest.mark.root, pytest.mark.fio]

#: the PTS IOPS test cut to 9 cells (the three v2.0 tracking cells among them)
QUICK_IOPS = ("run", "pts", "--profile", "quick", "--tests", "iops", "--block-sizes",
              "4,64,1024", "--mixes", "100/0,65/35,0/100", "--round-seconds", "0.1",
              "--qd", "8", "--destroy-data")


@dataclass
class Lab:
    net: NetLab
    devices: list[str]
    env: dict[str, str]
    store: Path

    def targets(self) -> str:
        return ",".join(f"h{i + 1}:{d}" for i, d in enumerate(self.devices))

    def target_options(self) -> list[str]:
        """``--target h1:/dev/... --target h2:/dev/...``."""
        return [a for i, d in enumerate(self.devices) for a in ("--target", f"h{i + 1}:{d}")]


def _lab(net: NetLab, emu_run_dir: Path, shm_dir: Path, *, profile: str = "enterprise-tlc",
         size: str = "128MiB", devices: list[str] | None = None) -> Lab:
    """The lab's hosts, each with an emulated SSD: ``devices`` started before the lab
    (:func:`emulated`), else started now (the hosts' agents then see no emulator's
    ground truth: a FUSE mount made after a host's sshd started is not in its mount
    namespace)."""
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}
    if devices is None:
        devices = emulated(len(net.hosts), emu_run_dir, profile=profile, size=size)
    agent = f"env SSDLAB_EMU_RUN_DIR={emu_run_dir} {sys.executable} -m ssdlab"
    env.update(SSDLAB_SSH_CONFIG=str(net.ssh_config), SSDLAB_AGENT_COMMAND=agent)
    return Lab(net, devices, env, shm_dir / "results.sqlite")


def emulated(count: int, emu_run_dir: Path, *, profile: str = "enterprise-tlc",
             size: str = "128MiB") -> list[str]:
    """Emulated SSDs ``host1``, ``host2``, ... behind loop devices: their devices."""
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}
    devices = []
    for i in range(count):
        started = ssdlab("emulator", "start", "--name", f"host{i + 1}", "--size", size,
                         "--profile", profile, "--loop", env=env)
        assert started.returncode == 0, started.stderr
        devices.append(next(line.split()[-1] for line in started.stdout.splitlines()
                            if "target:" in line))
    return devices


@pytest.fixture
def three_hosts(emu_run_dir: Path, shm_dir: Path) -> Iterator[Lab]:
    with NetLab(3, stranger=False) as net:
        yield _lab(net, emu_run_dir, shm_dir)


def _written(name: str) -> int:
    emu = emulator.load(name)
    assert emu is not None
    counters = emulator.stats(emu)["counters"]
    assert isinstance(counters, dict)
    return int(counters["host_write_bytes"])


# -- the aggregate ------------------------------------------------------------------------


def _client_stats(stdout: str) -> list[dict[str, Any]]:
    """fio's per-client job results, read straight from its output."""
    start = stdout.index("\n{") + 1 if not stdout.startswith("{") else 0
    document, _ = json.JSONDecoder().raw_decode(stdout[start:])
    return [e for e in document["client_stats"] if e["jobname"] != "All clients"]


def _percentile_ns(bins: dict[int, int], pct: float) -> int:
    """The smallest latency with at least pct % of the samples at or below it."""
    total = sum(bins.values())
    rank = max(1, math.ceil(pct / 100 * total))
    seen = 0
    for value in sorted(bins):
        seen += bins[value]
        if seen >= rank:
            return value
    raise AssertionError("no samples")


def _check_aggregate(cell: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """One stored cell against the hosts' own results of its job."""
    assert len(entries) == 3
    iops = sum(e["read"]["iops"] + e["write"]["iops"] for e in entries)
    assert cell["iops"] == pytest.approx(iops, rel=0.01)
    bins: dict[int, int] = {}
    lat_max = 0.0
    for e in entries:
        for d in ("read", "write"):
            clat = e[d]["clat_ns"]
            for value, count in clat.get("bins", {}).items():
                bins[int(value)] = bins.get(int(value), 0) + int(count)
            if e[d]["total_ios"]:
                lat_max = max(lat_max, clat["max"])
    for key, pct in (("lat_p99_us", 99.0), ("lat_p99_9_us", 99.9)):
        expected = min(_percentile_ns(bins, pct), lat_max) / 1000
        assert cell[key] == pytest.approx(expected, rel=1e-12), (cell["cell"], key)


@pytest.mark.browser
def test_one_pts_run_on_three_hosts(three_hosts: Lab) -> None:
    lab = three_hosts
    before = [_written(f"host{i + 1}") for i in range(3)]
    done = ssdlab(*QUICK_IOPS, "--max-rounds", "5", *lab.target_options(),
                  "--store", str(lab.store), env=lab.env)
    assert done.returncode == 0, done.stderr
    run_id = only_run_id(lab.store)
    check_stored(lab.store, run_id)  # every document its declared record, host-truth too
    with Store.open(lab.store) as store:
        run = store.load(run_id, with_raw=True)
    hosts = run.target["details"]["hosts"]
    assert [h["host"] for h in hosts] == ["h1", "h2", "h3"]
    rounds = [r for r in run.test("iops").rounds if r.status == "ok"]
    assert len(rounds) >= 1
    per_host = {int(e.detail["round"]): e.detail["hosts"] for e in run.events
                if e.kind == "host-round" and e.detail}
    starts = {int(e.detail["round"]): e.detail.get("start") for e in run.events
              if e.kind == "host-round" and e.detail}
    for r in rounds:
        assert r.stdout is not None
        stats = _client_stats(r.stdout)
        for cell in r.cells:
            _check_aggregate(cell, [e for e in stats if e["jobname"] == cell["cell"]])
        parts = per_host[r.round_no]
        assert sorted(parts) == ["h1", "h2", "h3"]
        # when each host's cells started (tests/integration/test_round_start_real.py)
        start = starts[r.round_no]
        assert start is not None and sorted(start["hosts"]) == ["h1", "h2", "h3"]
        assert len(start["cell_skew_s"]) == len(r.cells)
        for name, value in r.tracking.items():
            hosts_sum = sum(p["tracking"][name] for p in parts.values())
            assert value == pytest.approx(hosts_sum, rel=0.01)
    verdicts = [e.detail for e in run.events if e.kind == "host-verdicts"]
    assert verdicts and verdicts[0] is not None
    assert sorted(verdicts[0]["hosts"]) == ["h1", "h2", "h3"]
    # every host's own drive was written by its own share of the run
    after = [_written(f"host{i + 1}") for i in range(3)]
    assert all(a > b for a, b in zip(after, before, strict=True))
    shown = ssdlab("show", run_id, "--store", str(lab.store), env=lab.env)
    assert shown.returncode == 0 and shown.stderr == ""
    for host in ("h1", "h2", "h3"):
        assert f"host {host} (" in shown.stdout
        assert f"  host {host}: last round IOPS 4 KiB 0/100 " in shown.stdout
    _check_report(lab, run_id)


def _check_report(lab: Lab, run_id: str) -> None:
    """The report's hosts page in Chromium: a chart per tracking variable with a line per
    host and the aggregate, each host's verdict, no console error."""
    out = lab.store.parent / "report"
    report = ssdlab("report", run_id, "-o", str(out), "--no-pdf", "--store", str(lab.store),
                    env=lab.env)
    assert report.returncode == 0, report.stderr
    with open_page(out / "report.html") as page:
        assert page.console_errors() == []
        found = page.evaluate("""(() => {
            const page = [...document.querySelectorAll('h2')]
                .find(h => h.textContent.startsWith('Hosts: '));
            const section = page.closest('section') || page.parentElement;
            return {charts: section.querySelectorAll('svg').length,
                    text: section.textContent};
        })()""")
    assert found["charts"] >= 3
    for name in ("h1", "h2", "h3", "all hosts", "Each host's steady state"):
        assert name in found["text"]


# -- security -----------------------------------------------------------------------------


def _listeners(net: NetLab, host: str) -> list[str]:
    """Every listening TCP and UDP socket in the host's namespace (local address:port)."""
    out = net.exec(host, "ss", "-Hltun", check=True).stdout
    return sorted(line.split()[4] for line in out.splitlines() if line.strip())


def test_without_the_key_nothing_runs_on_a_host(emu_run_dir: Path, shm_dir: Path,
                                                 loop_device: Any) -> None:
    with NetLab(1, stranger=True) as net:
        lab = _lab(net, emu_run_dir, shm_dir)
        written = _written("host1")
        # the coordinator's own agent serving h1: its fio server is on a private socket
        with subprocess.Popen(
            ["ssh", "-F", str(net.ssh_config), "h1",
             f"{lab.env['SSDLAB_AGENT_COMMAND']} agent serve --token t1 --target "
             f"{lab.devices[0]} --destroy-data"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True) as serve:
            assert serve.stdout is not None
            ready = json.loads(serve.stdout.readline())
            assert ready["ready"] is True
            address = net.host("h1").address
            assert _listeners(net, "h1") == [f"{address}:22"]
            # the stranger: no login, and fio's port answers nobody
            login = net.exec_stranger("ssh", "-F", str(net.stranger_ssh_config), "h1",
                                      "fio", "--version")
            assert login.returncode == 255 and "Permission denied" in login.stderr
            job = shm_dir / "write.fio"
            job.write_text(f"[w]\nfilename={lab.devices[0]}\nrw=write\nsize=1m\n")
            for port in ("8765", "22"):
                fio = net.exec_stranger("fio", f"--client={address},{port}", str(job),
                                        timeout=60)
                assert fio.returncode != 0
            serve.communicate(timeout=30)  # stdin closes: the agent stops its server
        assert serve.returncode == 0
        assert _written("host1") == written
        assert not Path("/run/ssdlab-agent/t1").exists()


def test_an_agent_refuses_what_its_guardrails_refuse(emu_run_dir: Path, shm_dir: Path,
                                                      loop_device: Any) -> None:
    mounted = loop_device(64 * 1024 * 1024)
    mount = shm_dir / "mnt"
    mount.mkdir()
    subprocess.run(["mkfs.ext4", "-q", mounted], check=True)
    subprocess.run(["mount", mounted, str(mount)], check=True)
    try:
        with NetLab(1, stranger=False, keep=[mount]) as net:  # h1 has it mounted
            lab = _lab(net, emu_run_dir, shm_dir)
            done = ssdlab(*QUICK_IOPS, "--target", f"h1:{mounted}", "--store",
                          str(lab.store), env=lab.env)
            assert done.returncode == 3
            line = one_line_error(done)
            assert line.startswith(f"Error: host h1: refusing {mounted}"), line
            assert "mounted" in line
            assert not lab.store.exists()
            # asked directly, the agent starts no fio server either
            direct = net.ssh("h1", lab.env["SSDLAB_AGENT_COMMAND"], "agent", "serve",
                             "--token", "t2", "--target", mounted, "--destroy-data")
            assert direct.returncode == 3
            assert "mounted" in json.loads(direct.stdout.splitlines()[-1])["error"]
            assert not Path("/run/ssdlab-agent/t2").exists()
            # a mistyped device name: refused by the host's agent, made a file nowhere
            typo = f"/dev/nvme-ssdlab-typo-{os.getpid()}"
            done = ssdlab(*QUICK_IOPS, "--target", f"h1:{typo}", "--store", str(lab.store),
                          env=lab.env)
            assert done.returncode == 3, done.stderr
            line = one_line_error(done)
            assert line.startswith(f"Error: host h1: target {typo} is not a block device"), line
            assert not os.path.lexists(typo) and not lab.store.exists()
    finally:
        subprocess.run(["umount", str(mount)], check=True)


# -- a host that drops --------------------------------------------------------------------


def test_a_host_killed_mid_run(emu_run_dir: Path, shm_dir: Path) -> None:
    with NetLab(2, stranger=False) as net:
        lab = _lab(net, emu_run_dir, shm_dir)
        # two cells a round (v1.1 tracks 4 KiB random writes alone): about a second each
        argv = [sys.executable, "-m", "ssdlab", *QUICK_IOPS, "--max-rounds", "8",
                "--tracking", "v1.1", "--block-sizes", "4", "--mixes", "100/0,0/100",
                "--target", lab.targets(), "--store", str(lab.store)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, **lab.env})
        deadline = time.monotonic() + 240
        while len(ok_rounds(lab.store)) < 2 and proc.poll() is None:
            assert time.monotonic() < deadline, "no two rounds in time"
            time.sleep(0.1)
        net.kill_sshd("h2")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, out + err
        line = one_line_error(subprocess.CompletedProcess(argv, 1, out, err))
        assert line.startswith("Error: host h2 "), line
        assert f"`{HINTED} resume {only_run_id(lab.store)}` goes on" in line
        kept = ok_rounds(lab.store)
        assert len(kept) >= 2 and kept == list(range(1, len(kept) + 1))
        run_id = only_run_id(lab.store)
        with Store.open(lab.store) as store:
            stopped = store.load(run_id)
        host_rounds = [e.detail for e in stopped.events if e.kind == "host-round"]
        assert [sorted(d["hosts"]) for d in host_rounds if d] == [["h1", "h2"]] * len(kept)
        net.start_sshd("h2")
        resumed = ssdlab("resume", run_id, "--store", str(lab.store), "--destroy-data",
                         env=lab.env)
        assert resumed.returncode == 0, resumed.stderr
        final = ok_rounds(lab.store)
        assert final == list(range(1, len(final) + 1)) and len(final) > len(kept)
        assert check_stored(lab.store, run_id).status == "complete"
