"""Every suite of issue 33 item 3 on two hosts in one command (docs/hosts.md), with real
ssh, real fio servers and real emulated SSDs: the namespace hosts of
tests/support/netlab.py, as tests/integration/test_hosts_real.py builds them.

For each suite that runs on several hosts: one run on ``h1`` and ``h2`` at once, each
host's part of every round kept (``host-round`` events naming both), and every stored
cell's IOPS the sum of the two hosts' own (within 1 %, read from fio's raw per-client
output kept with the round). The suites that read fio's logs read each host's copy (fio's
client writes what a server sends back beside the log's name): the IOmeter-like timeline
and the saturation series are the hosts' sum, the SLC probe analyses each host's write
alone and their writes together. A suite that cannot run on other hosts says why in one
line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from ssdlab.targets import emulator
from tests.integration.conftest import only_run_id
from tests.integration.test_hosts_real import Lab, _client_stats, _lab, _written, emulated
from tests.support.cli import one_line_error, ssdlab
from tests.support.netlab import NetLab
from tests.support.stored import check_declared

pytestmark = [pytest.mark.root, pytest.mark.fio]

HOSTS = ["h1", "h2"]
MIB = 1 << 20


@pytest.fixture
def two_hosts(emu_run_dir: Path, shm_dir: Path) -> Iterator[Lab]:
    """Two hosts, each with an emulated SSD started first (its ground truth is then
    visible to the host's agent)."""
    devices = emulated(2, emu_run_dir)
    with NetLab(2, stranger=False) as net:
        yield _lab(net, emu_run_dir, shm_dir, devices=devices)


def _run(lab: Lab, *argv: str, timeout: float = 120, on_drives: bool = True) -> RunData:
    """``ssdlab run ...`` on both hosts' emulated SSDs (``on_drives``; else where ``argv``
    says): the stored run (checked to be the records it declares), after a fresh store."""
    if lab.store.exists():
        lab.store.unlink()
    started = time.monotonic()
    targets = lab.target_options() if on_drives else []
    done = ssdlab("run", *argv, *targets, "--store", str(lab.store), env=lab.env,
                  timeout=timeout)
    print(f"{argv[0]} on {len(HOSTS)} hosts: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    assert done.stderr == ""
    with Store.open(lab.store) as store:
        run = store.load(only_run_id(lab.store), with_raw=True)
    check_declared(run)
    assert [h["host"] for h in run.target["details"]["hosts"]] == HOSTS
    return run


def _check_rounds(run: RunData) -> int:
    """Every round that is one fio run: each host's part kept, and each cell's IOPS the
    sum of the hosts' own. The number of cells checked."""
    parts = {(e.test, int(e.detail["round"])): e.detail["hosts"] for e in run.events
             if e.kind == "host-round" and e.detail}
    checked = 0
    for test in run.tests:
        for r in test.rounds:
            if r.status != "ok" or not r.stdout:  # a slice of a log, not a fio run
                continue
            assert sorted(parts[(test.name, r.round_no)]) == HOSTS, (test.name, r.round_no)
            stats = _client_stats(r.stdout)
            for cell in r.cells:
                if "iops" not in cell:
                    continue
                entries = [e for e in stats if e["jobname"] == cell["cell"]]
                assert len(entries) == len(HOSTS), (test.name, r.round_no, cell["cell"])
                iops = sum(e["read"]["iops"] + e["write"]["iops"] for e in entries)
                assert cell["iops"] == pytest.approx(iops, rel=0.01), (test.name, r.round_no)
                checked += 1
    return checked


def _host_iops(run: RunData, test: str, round_no: int) -> dict[str, float]:
    event = next(e.detail for e in run.events if e.kind == "host-round" and e.test == test
                 and e.detail and e.detail["round"] == round_no)
    return {h: sum(j["iops"] for j in part["jobs"].values())
            for h, part in event["hosts"].items()}


# -- fio's JSON only ----------------------------------------------------------------------


def test_block_presets_on_two_hosts(two_hosts: Lab) -> None:
    """CDM and IOmeter (its per-second timeline from both hosts' IOPS logs)."""
    lab = two_hosts
    cdm = _run(lab, "cdm", "--profile", "quick", "--modes", "read",
               "--measure-seconds", "0.3", "--destroy-data")
    assert _check_rounds(cdm) == len(cdm.test("cdm").rounds) >= 4
    iometer = _run(lab, "iometer", "--profile", "quick", "--block-sizes", "4", "--seconds",
                   "1", "--log-interval", "200", "--destroy-data")
    assert _check_rounds(iometer) >= 2
    for r in iometer.test("iometer").rounds:
        cell = r.cells[0]
        assert len(cell["timeline"]) >= 3
        # the timeline is the hosts' sum: its I/Os are (nearly) every I/O of both hosts
        # (fio leaves a last partial interval out of its logs)
        ios = _timeline_ios([(t, rate) for t, rate in cell["timeline"]])
        total = sum(e["read"]["total_ios"] + e["write"]["total_ios"]
                    for e in _client_stats(r.stdout or "") if e["jobname"] == cell["cell"])
        assert 0.7 * total <= ios <= 1.05 * total, (ios, total)


def _timeline_ios(points: list[tuple[float, float]]) -> float:
    """I/Os a timeline of (interval end s, IOPS) counts."""
    ends = [t for t, _ in points]
    return sum(rate * (end - start) for (end, rate), start in zip(points, [0.0, *ends],
                                                                   strict=False))


def test_cdm_in_a_directory_on_each_host(two_hosts: Lab, shm_dir: Path) -> None:
    """``--dir h1:A,h2:B``: each host's agent makes its work directory and test file,
    and removes them when the run ends."""
    lab = two_hosts
    dirs = [shm_dir / "share1", shm_dir / "share2"]
    for d in dirs:
        d.mkdir()
    spec = ",".join(f"h{i + 1}:{d}" for i, d in enumerate(dirs))
    run = _run(lab, "cdm", "--dir", spec, "--profile", "quick", "--modes", "write",
               "--measure-seconds", "0.3", on_drives=False)
    assert _check_rounds(run) == len(run.test("cdm").rounds) >= 4
    hosts = run.plan["directory"]["hosts"]
    assert sorted(hosts) == HOSTS and hosts["h1"]["path"] == str(dirs[0])
    assert [h["path"] for h in run.target["details"]["hosts"]] == [str(d) for d in dirs]
    said = next(e.detail for e in run.events if e.kind == "hosts" and e.detail)
    served = [h["path"] for h in said["hosts"]]  # each host's test file, as it served it
    assert [Path(p).parent.parent for p in served] == dirs  # DIR/ssdlab-work-X/cdm file
    cleanup = sorted(e.detail["path"] for e in run.events if e.kind == "cleanup" and e.detail
                     and e.detail["removed"])
    assert cleanup == [f"h{i + 1}:{Path(p).parent}" for i, p in enumerate(served)]
    assert all(list(d.iterdir()) == [] for d in dirs)
    shown = ssdlab("show", run.run_id, "--store", str(lab.store), env=lab.env)
    assert shown.returncode == 0 and shown.stderr == ""
    for host in HOSTS:  # a line per host: its jobs' IOPS of the last measurement
        assert f"  host {host}: last round IOPS " in shown.stdout


def test_verify_and_latency_iops_on_two_hosts(two_hosts: Lab) -> None:
    lab = two_hosts
    before = [_written(f"host{i + 1}") for i in range(2)]
    verify = _run(lab, "verify", "--active-range", "50", "--destroy-data")
    result = verify.test("verify").result
    assert verify.test("verify").status == "passed" and result["failures"] == 0
    # each host wrote and read back its own half: the run's bytes are their sum
    half = 64 * MIB
    assert result["written_bytes"] == result["read_bytes"] == 2 * half
    assert [_written(f"host{i + 1}") - b for i, b in enumerate(before)] == [half] * 2
    assert sorted(_host_iops(verify, "verify", 1)) == HOSTS

    latency = _run(lab, "latency-iops", "--profile", "quick", "--block-sizes", "4",
                   "--mixes", "100/0", "--threads", "1", "--max-threads", "1", "--qd", "1,4",
                   "--max-qd", "4", "--warmup-seconds", "0.2", "--measure-seconds", "0.4",
                   "--active-range", "50", "--purge", "none", "--no-precondition",
                   "--destroy-data")
    ok = [r for r in latency.test("latency-iops").rounds if r.status == "ok"]
    assert _check_rounds(latency) == len(ok) >= 2
    test = latency.test("latency-iops")
    assert test.verdicts["numa"]["message"] == "not checked: the targets are on other hosts"
    assert "host CPU was not measured" in test.verdicts["host_bound"]["message"]


def test_peak_and_op_sweep_on_two_hosts(two_hosts: Lab) -> None:
    lab = two_hosts
    peak = _run(lab, "peak", "--workloads", "rnd4k_read", "--profile", "quick",
                "--probe-seconds", "0.3", "--ramp-seconds", "0.1", "--engines", "psync",
                "--max-threads", "1", "--max-qd", "4", "--max-probes", "3",
                "--max-latency", "mean=10s")
    assert _check_rounds(peak) >= 2
    assert "not pinned" in peak.test("rnd4k_read").result["pinning"]
    sweep = _run(lab, "op-sweep", "--profile", "quick", "--op", "20", "--max-rounds", "5",
                 "--round-seconds", "0.5", "--destroy-data")
    assert _check_rounds(sweep) >= 2
    setting = sweep.test("op-sweep").result["settings"][0]
    # the set's write amplification: both emulated SSDs' counters summed
    assert setting["emulator_wa"] is not None and setting["emulator_wa"] >= 1.0


# -- fio's logs -----------------------------------------------------------------------------


def test_saturation_on_two_hosts(two_hosts: Lab) -> None:
    lab = two_hosts
    run = _run(lab, "saturation", "--profile", "quick", "--max-rounds", "3", "--round-seconds",
               "0.5", "--waits", "1", "--bursts", "1", "--baseline-rounds", "2",
               "--burst-seconds", "0.5", "--destroy-data")
    wsat = run.test("wsat").rounds
    bursts = [r for r in run.test("hir").rounds if r.cells[0].get("kind") == "burst"]
    assert wsat and len(bursts) == 1
    assert _check_rounds(run) == len(wsat) + len(bursts)
    for r in wsat:
        cell = r.cells[0]
        # the series is the hosts' sum: its bytes are (nearly) every byte both wrote
        # (fio leaves a last partial interval out of its logs)
        total = sum(e["write"]["io_bytes"] for e in _client_stats(r.stdout or "")
                    if e["jobname"] == cell["cell"])
        logged = cell["series"][-1][1] - (cell["written_bytes"] - total)
        assert 0.7 * total <= logged <= 1.05 * total, (logged, total)
    baseline = [r for r in run.test("hir").rounds if r.cells[0].get("kind") == "baseline"]
    assert baseline  # cut from both hosts' IOPS logs


def test_slc_probe_on_two_hosts(emu_run_dir: Path, shm_dir: Path) -> None:
    devices = emulated(2, emu_run_dir, profile="client-slc", size="256MiB")
    with NetLab(2, stranger=False) as net:
        lab = _lab(net, emu_run_dir, shm_dir, devices=devices)
        emu = emulator.load("host1")
        assert emu is not None
        cache = int(emulator.stats(emu)["config"]["slc_bytes"])  # type: ignore[index]
        run = _run(lab, "slc-probe", "--write-size", str(2 * cache + 16 * MIB), "--settle",
                   "0", "--destroy-data")
    result = run.test("slc-probe").result
    passes = [e.detail for e in run.events if e.kind == "host-pass" and e.detail]
    assert len(passes) == 1 and sorted(passes[0]["hosts"]) == HOSTS
    own = passes[0]["hosts"]
    print(json.dumps({"cache": cache, "hosts": {h: p["estimate_bytes"] for h, p in own.items()},
                      "set": result["estimate_bytes"]}))
    slice_bytes = result["slice_bytes"]
    for host, found in own.items():
        # each host's own write falls where its own cache filled (a slice late at most).
        # Its first cliff is the estimate; here, where the hosts share two cores, one
        # host's start can halve the other's rate first, so any of its cliffs may be it
        assert any(abs(c["at_bytes"] - cache) <= max(0.1 * cache, slice_bytes)
                   for c in found["cliffs"]), (host, found["cliffs"])
    # no aggregate: the hosts' writes together are no one cache; the result is each host's
    assert result["estimate_bytes"] is None and result["cliff_found"]
    assert all(f"{h}: {p['message']}" in result["message"] for h, p in own.items())
    assert result["passes"][0]["written_bytes"] == sum(p["written_bytes"] for p in own.values())


# -- the suites that cannot -----------------------------------------------------------------


@pytest.mark.parametrize(("suite", "why"), [
    ("db", "it makes a file system (or a work directory) for database servers"),
    ("replay", "fio reads the trace (read_iolog) where it runs"),
])
def test_a_suite_that_cannot_says_why(suite: str, why: str, shm_dir: Path) -> None:
    store = shm_dir / "results.sqlite"
    done = ssdlab("run", suite, "--target", "h1:/dev/nvme0n1", "--target", "h2:/dev/nvme0n1",
                  "--store", str(store))
    assert done.returncode == 2
    line = one_line_error(done)
    assert line.startswith(f"Error: `ssdlab run {suite}` runs on targets of this host only: "
                           f"{why}"), line
    assert not store.exists()
