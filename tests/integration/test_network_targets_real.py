"""Targets reached over a real network, between network namespaces of this machine
(tests/support/netlab.py: each host a namespace behind a veth pair on a bridge of the
root namespace, with its own sshd):

* an NBD export: nbdkit in host h1 serves an emulated SSD's disk file; from the root
  namespace a quick PTS IOPS test runs through fio's nbd engine on ``nbd://ADDR:PORT/ssd``.
  The record says nbd, the server, the export and the link; every job file names the
  engine and the URI; the emulator's own counters grew by at least what fio reports
  written (and the purge's trim reached it);
* an sshfs share: host h2's sshd serves a directory (on a tmpfs the test mounts) over
  SFTP, mounted with sshfs in the root namespace under an ssh_config host alias; the quick
  file presets run on it and their records say sshfs, the server and the link.

Everything (servers, mounts, namespaces, the emulator) is removed afterwards, also when a
test fails. Nothing here judges a time: counts, bytes and what the records say.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.engine.parser import parse_fio_output
from ssdlab.report.build import render
from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from ssdlab.targets import emulator
from ssdlab.targets.network import sshfs_command
from tests.support.cli import one_line_error, ssdlab
from tests.support.netlab import NetLab

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1 << 20
EMU_SIZE = 256 * MIB
NBD_PORT = 10809
EXPORT = "ssd"
DESCRIPTION = "ssdlab emulated SSD"
READY_TIMEOUT_S = 20.0
#: the file presets as the local test runs them (tests/integration/test_file_presets_real.py)
TINY: dict[str, tuple[str, ...]] = {
    "aja": ("--size", "8MiB,16MiB"),
    "diskfill": ("--size", "4MiB", "--passes", "2"),
    "smallfiles": ("--size", "4MiB", "--wait-seconds", "0.2"),
    "copy": ("--size", "4MiB", "--repetitions", "2"),
}


def _need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


@pytest.fixture
def lab() -> Iterator[NetLab]:
    with NetLab(2, stranger=False) as built:
        yield built


def _wait_for(what: str, ready: object, deadline_s: float = READY_TIMEOUT_S) -> None:
    """Poll ``ready()`` (a callable returning bool) until it is true."""
    assert callable(ready)
    deadline = time.monotonic() + deadline_s
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not ready within {deadline_s:g} s", pytrace=False)
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def nbdkit_in(lab: NetLab, disk: str, log: Path) -> Iterator[str]:
    """nbdkit in h1 serving ``disk`` as export "ssd" (with a description); its URI."""
    host = lab.host("h1")
    argv = lab.argv(host, "nbdkit", "-f", "--exit-with-parent", "-i", host.address,
                    "-p", str(NBD_PORT), "--filter=exportname", "file", disk,
                    f"exportname={EXPORT}", f"exportdesc=fixed:{DESCRIPTION}",
                    "exportname-strict=true")
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    uri = f"nbd://{host.address}:{NBD_PORT}/{EXPORT}"
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"nbdkit exited with {proc.returncode}: {log.read_text()}",
                            pytrace=False)
            return subprocess.run(["nbdinfo", "--size", uri], capture_output=True,
                                  check=False).returncode == 0
        _wait_for("nbdkit", ready)
        yield uri
    finally:
        _stop(proc)


def _counters(emu: emulator.Emulator) -> dict[str, int]:
    counters = emulator.stats(emu)["counters"]
    assert isinstance(counters, dict)
    return {k: int(v) for k, v in counters.items() if isinstance(v, int)}


def _fio_written(run: RunData) -> tuple[int, int]:
    """(bytes fio reports written over the whole run, fio invocations counted)."""
    outputs = [r.stdout for t in run.tests for r in t.rounds if r.stdout]
    outputs += [s.fio.stdout for t in run.tests for s in t.steps if s.fio and s.fio.stdout]
    return sum(job.write.io_bytes for out in outputs
               for job in parse_fio_output(out).jobs), len(outputs)


def _text_of(html: str) -> str:
    """The report's text (long tokens sit in spans that may break anywhere)."""
    return re.sub(r"<[^>]+>", "", html)


def _only_run(store: Path) -> RunData:
    with Store.open(store) as opened:
        runs = opened.list_runs()
        assert len(runs) == 1, runs
        return opened.load(runs[0].run_id, with_raw=True)


def test_quick_pts_iops_through_fio_nbd_engine_from_another_namespace(
    lab: NetLab, emu_run_dir: Path, tmp_path: Path
) -> None:
    _need("nbdkit", "nbdinfo")
    emu = emulator.start("nbd", "enterprise-tlc", EMU_SIZE)
    store = tmp_path / "results.sqlite"
    env = {"SSDLAB_EMU_RUN_DIR": str(emu_run_dir)}
    with nbdkit_in(lab, emu.disk, tmp_path / "nbdkit.log") as uri:
        bridge, local = f"{lab.prefix}br", str(lab.subnet[1])
        before = _counters(emu)
        # the IOPS test cut to 9 cells (the three v2.0 tracking cells among them)
        run_args = ("run", "pts", "--tests", "iops", "--profile", "quick", "--round-seconds",
                    "0.1", "--max-rounds", "5", "--qd", "8", "--block-sizes", "4,64,1024",
                    "--mixes", "100/0,65/35,0/100", "--target", uri, "--store", str(store))

        refused = ssdlab(*run_args, env=env)  # no --destroy-data: refused, nothing written
        assert refused.returncode == 3, refused.stderr
        assert one_line_error(refused) == (f"Error: refusing to write to {uri} without "
                                           "--destroy-data: every byte of the export will "
                                           "be overwritten")
        dry = ssdlab(*run_args, "--destroy-data", "--dry-run", env=env)
        assert dry.returncode == 0 and dry.stderr == "", dry.stderr
        assert f"uri={uri}" in dry.stdout.splitlines()
        assert "ioengine=nbd" in dry.stdout.splitlines() and "filename=" not in dry.stdout
        assert f"over NBD from {lab.host('h1').address}:{NBD_PORT}, export 'ssd'" in dry.stdout
        assert _counters(emu)["host_write_bytes"] == before["host_write_bytes"]
        assert not store.exists()

        started = time.monotonic()
        result = ssdlab(*run_args, "--destroy-data", env=env, timeout=800)
        print(f"quick PTS IOPS through nbd: {time.monotonic() - started:.1f} s")
        assert result.returncode == 0, result.stderr + result.stdout[-3000:]
        assert result.stderr == ""
        after = _counters(emu)
        shown = ssdlab("show", "last", "--store", str(store), env=env)

    run = _only_run(store)
    target = run.target
    assert (target["kind"], target["device_class"], target["path"]) == ("nbd", "nbd", uri)
    assert target["capacity_bytes"] == EMU_SIZE
    net = target["details"]["network"]
    assert net["transport"] == "nbd" and net["fio_engine"] == "nbd"
    assert net["server"] == f"{lab.host('h1').address}:{NBD_PORT}"
    assert net["server_address"] == lab.host("h1").address
    assert (net["export"], net["description"]) == (EXPORT, DESCRIPTION)
    assert net["capabilities"]["can_trim"] is True
    assert net["purge"] == "trim through fio's nbd engine"
    link = net["link"]
    assert (link["interface"], link["kind"], link["local_address"]) == (bridge, "bridge", local)
    assert link["mtu"] == 1500 and link["gateway"] is None
    assert net["round_trip"]["reads"] == 8 and net["round_trip"]["median_us"] > 0

    test = run.test("iops")
    assert test.status in ("steady", "not_steady"), test.result
    assert test.params.get("ioengine", "nbd") == "nbd"
    cells = test.result["cells"]
    assert len(cells) == 3 * 3 and all(c["iops"] > 0 for c in cells)
    assert run.plan["options"]["ioengine"] == "nbd"
    for rnd in test.rounds:
        assert rnd.job_text is not None
        lines = rnd.job_text.splitlines()
        assert f"uri={uri}" in lines and "ioengine=nbd" in lines, rnd.round_no
        assert not any(line.startswith("filename=") for line in lines)
    purge = next(s for s in test.steps if s.kind == "purge")
    assert purge.detail["method"] == "nbd-trim" and purge.detail["ok"] is True, purge.detail
    assert after["trimmed_bytes"] - before["trimmed_bytes"] >= EMU_SIZE  # the trim arrived
    written, invocations = _fio_written(run)
    grown = after["host_write_bytes"] - before["host_write_bytes"]
    print(f"fio reports {written:,} bytes written in {invocations} runs; the emulator "
          f"counted {grown:,} ({after['host_write_cmds'] - before['host_write_cmds']:,} "
          "writes)")
    assert invocations == len(test.rounds) + 1  # the rounds and the preconditioning
    assert written >= 2 * EMU_SIZE  # the preconditioning alone writes twice the capacity
    assert grown >= written
    # no member sampling, no health log: the drive is the server's
    assert any("is an NBD export" in e.message for e in run.events if e.kind != "health")
    assert not [e for e in run.events if e.kind == "health"]

    print("\n".join(shown.stdout.splitlines()[3:5]))
    assert shown.returncode == 0 and shown.stderr == ""
    assert (f"  over NBD from {lab.host('h1').address}:{NBD_PORT}, export 'ssd' "
            f"({DESCRIPTION}), through fio's nbd engine, link {bridge} (bridge) MTU 1500"
            in shown.stdout), shown.stdout[:2000]
    assert f"over NBD from {lab.host('h1').address}:{NBD_PORT}" in _text_of(render([run])[0])


# -- sshfs --------------------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(where: Path) -> Iterator[Path]:
    """A tmpfs of the test's own at ``where`` (what the share serves)."""
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m,mode=0755", "ssdlab-share",
                    str(where)], check=True, capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False, capture_output=True)


@contextlib.contextmanager
def sshfs_mount(lab: NetLab, remote: Path, where: Path) -> Iterator[Path]:
    """``remote`` of host h2 mounted at ``where`` by sshfs (host alias h2 of the lab's
    ssh_config); unmounted, and its sshfs process gone, afterwards."""
    where.mkdir()
    done = subprocess.run(["sshfs", "-F", str(lab.ssh_config), f"h2:{remote}", str(where),
                           "-o", "cache=no,dir_cache=no"],
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    argv = sshfs_command(str(where))
    pid = next((p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == argv), None)
    try:
        yield where
    finally:
        if subprocess.run(["fusermount3", "-u", str(where)], capture_output=True,
                          check=False).returncode:
            subprocess.run(["umount", "--lazy", str(where)], capture_output=True, check=False)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)


def _cmdline(pid: str) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def test_file_presets_on_an_sshfs_share_from_another_namespace(
    lab: NetLab, shm_dir: Path, tmp_path: Path
) -> None:
    _need("sshfs", "fusermount3")
    store = tmp_path / "results.sqlite"
    server = lab.host("h2").address
    with tmpfs(shm_dir / "export") as export, sshfs_mount(lab, export, shm_dir / "mnt") as mnt:
        (export / "keep.txt").write_text("the user's file\n")
        dry = ssdlab("run", "aja", "--dir", str(mnt), "--profile", "quick", "--dry-run",
                     *TINY["aja"], "--store", str(store))
        assert dry.returncode == 0 and dry.stderr == "", dry.stderr
        assert "fuse.sshfs (network share)" in dry.stdout
        for preset, extra in TINY.items():
            result = ssdlab("run", preset, "--dir", str(mnt), "--profile", "quick",
                            "--store", str(store), *extra)
            assert result.returncode == 0, result.stderr + result.stdout[-2000:]
            assert result.stderr == ""
            assert sorted(os.listdir(export)) == ["keep.txt"], preset  # nothing left
        shown = ssdlab("show", "last", "--store", str(store))
        with Store.open(store) as opened:
            runs = [opened.load(r.run_id) for r in opened.list_runs()]

    assert sorted(r.suite for r in runs) == sorted(TINY)
    for run in runs:
        t = run.target
        assert run.status == "complete", (run.suite, run.message)
        assert (t["fs_type"], t["network_share"]) == ("fuse.sshfs", True)
        assert t["source"] == f"h2:{export}"
        net = t["network"]
        assert (net["transport"], net["server"], net["export"]) == ("sshfs", "h2", str(export))
        assert net["server_address"] == server  # the alias, resolved through ssh -G -F
        assert net["key_options"] == {"cache": "no", "dir_cache": "no"}
        assert net["client_command"][0] == "sshfs"
        assert net["link"]["interface"] == f"{lab.prefix}br" and net["link"]["mtu"] == 1500
        test = run.test(run.suite)
        assert test.status == "complete", test.result
        cells = [c for r in test.rounds for c in r.cells]
        assert cells and all(c["bw_bytes_per_s"] > 0 for c in cells)
        print(f"sshfs {run.suite}: " + "; ".join(
            f"{c['label']} {c['bw_bytes_per_s'] / 1e6:,.1f} MB/s" for c in cells))
    aja = next(r for r in runs if r.suite == "aja").test("aja")
    print("aja on sshfs:", aja.result.get("notes") or "O_DIRECT accepted")
    print("\n".join(shown.stdout.splitlines()[3:5]))
    assert shown.returncode == 0 and shown.stderr == ""
    assert (f"  over sshfs from {server}:{export}, link {lab.prefix}br (bridge) MTU 1500"
            in shown.stdout), shown.stdout[:1500]
    assert f"over sshfs from {server}:{export}" in _text_of(render(runs[:1])[0])
    assert json.dumps(runs[0].target)  # the record is plain JSON


def test_a_server_that_goes_away_stops_the_run_and_keeps_its_rounds(
    lab: NetLab, tmp_path: Path
) -> None:
    """nbdkit (the memory plugin) is killed after round 1: the round that fails names the
    export that no longer answers, the run stops with exit 1 and round 1 is kept."""
    _need("nbdkit", "nbdinfo")
    host = lab.host("h1")
    uri = f"nbd://{host.address}:{NBD_PORT}/"
    server = subprocess.Popen(lab.argv(host, "nbdkit", "-f", "--exit-with-parent", "-i",
                                       host.address, "-p", str(NBD_PORT), "memory", "256M"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        _wait_for("nbdkit", lambda: subprocess.run(["nbdinfo", "--size", uri],
                                                   capture_output=True).returncode == 0)
        store = tmp_path / "results.sqlite"
        argv = [sys.executable, "-m", "ssdlab", "run", "pts", "--tests", "iops", "--profile",
                "quick", "--round-seconds", "1", "--max-rounds", "5", "--qd", "8",
                "--block-sizes", "4,64,1024", "--mixes", "100/0,65/35,0/100", "--target", uri,
                "--destroy-data", "--store", str(store)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if "iops round 1:" in line:
                _stop(server)
                break
        out, err = proc.communicate(timeout=300)
    finally:
        _stop(server)
    assert proc.returncode == 1, out + err
    line = err.strip()
    assert "\n" not in line and line.startswith("Error: iops failed (round 2: "), err
    assert f"and {uri} does not answer" in line and "every completed round is kept" in line
    run = _only_run(store)
    assert run.status == "failed"
    assert [r.round_no for r in run.test("iops").rounds if r.status == "ok"] == [1]
