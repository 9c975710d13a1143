"""NVMe admin for real (issue 32, build item 5) on QEMU 7.2's emulated NVMe controllers:
identity read from the controller and kept in the run record; purge by Format NVM (the
data reads back as zeros) and a sanitize the controller cannot do refused before it is
sent; the volatile write cache feature recorded in both states; the SMART log's data units
written against fio's bytes; the guardrails (a namespace holding a file system, a mounted
one, another namespace of a controller in use) refused with nothing written. One guest:
nvme0 with one namespace, nvme1 with two; every test leaves its drives blank."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.vmlab import Drive, Guest, VmLab
from tests.vmlab.conftest import VMLAB_TEST_TIMEOUT_S

pytestmark = [pytest.mark.root, pytest.mark.vmlab, pytest.mark.timeout(VMLAB_TEST_TIMEOUT_S)]

MiB = 1 << 20
SIZE = 128 * MiB
#: the namespaces: nvme0n1 alone on its controller, nvme1n1 and nvme1n2 sharing nvme1
ALONE, FIRST, SECOND = "/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme1n2"
STORE = "/root/nvme-test.sqlite"
#: one cell of 4 KiB random writes, 5 rounds of 1 s, on the first half (the second half
#: is never written by fio: it shows what the purge left)
QUICK = ("--profile quick --tests iops --block-sizes 4 --mixes 0/100 --round-seconds 1 "
         "--max-rounds 5 --no-precondition")
HALF = 50
#: bytes of one SMART data unit: 1000 x 512 B (the count is rounded up)
DATA_UNIT = 512_000
PATTERN = 0xAB


@pytest.fixture(scope="module")
def guest(vmlab: VmLab) -> Iterator[Guest]:
    with vmlab.guest([Drive.scratch(SIZE), Drive.scratch(SIZE, namespaces=2)]) as running:
        yield running


def ssdlab(guest: Guest, args: str) -> subprocess.CompletedProcess[str]:
    return guest.ssh(f"SSDLAB_STORE={STORE} ssdlab {args}", timeout=900)


def sha(guest: Guest, device: str, skip_mib: int = 0) -> str:
    """sha256 of a namespace (from ``skip_mib`` on), read past the page cache."""
    return guest.run(f"dd if={device} bs=1M skip={skip_mib} iflag=direct status=none | "
                     "sha256sum").split()[0]


def digest(byte: int, size: int) -> str:
    return hashlib.sha256(bytes([byte]) * size).hexdigest()


def fill(guest: Guest, device: str, byte: int = PATTERN) -> None:
    guest.run(f"tr '\\000' '\\{byte:03o}' < /dev/zero | head -c {SIZE} | "
              f"dd of={device} bs=1M iflag=fullblock oflag=direct status=none")


def units_written(guest: Guest, device: str, nsid: int | None = None) -> int:
    """Data Units Written of the namespace's own SMART log (the controller's without
    ``nsid``), as nvme-cli 2.3 prints it (a string)."""
    scope = f"-n {nsid} " if nsid is not None else ""
    log = json.loads(guest.run(f"nvme smart-log {scope}-o json {device}"))
    return int(log["data_units_written"])


def export(guest: Guest, run_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(guest.run(
        f"SSDLAB_STORE={STORE} ssdlab export {run_id} --format json"))
    return record


def run_id_of(out: str) -> str:
    found = re.search(r"^run (\S+) complete", out, re.M)
    assert found, out
    return found[1]


def make_blank(guest: Guest, *devices: str) -> None:
    for device in devices:
        guest.run(f"wipefs -q -a {device}; blkdiscard -f {device}")
        assert guest.ssh(f"blkid -p {device}").returncode == 2  # no signature


@pytest.fixture(scope="module")
def formatted(guest: Guest) -> dict[str, Any]:
    """A quick run on ALONE with --purge nvme-format, its first half tested: the namespace
    held a pattern before; what the controller and the run record say."""
    fill(guest, ALONE)
    half = SIZE // 2
    before = {"second_half": sha(guest, ALONE, half // MiB),
              "units": units_written(guest, ALONE, 1)}
    done = ssdlab(guest, f"run pts --target {ALONE} --destroy-data --purge nvme-format "
                         f"--active-range {HALF} {QUICK}")
    assert done.returncode == 0, done.stderr
    run_id = run_id_of(done.stdout)
    after = {"second_half": sha(guest, ALONE, half // MiB),
             "units": units_written(guest, ALONE, 1)}
    return {"run_id": run_id, "record": export(guest, run_id), "before": before,
            "after": after, "show": guest.run(f"SSDLAB_STORE={STORE} ssdlab show {run_id}")}


def test_identity_is_read_from_the_controller_and_kept_in_the_run_record(
        guest: Guest, formatted: dict[str, Any]) -> None:
    ctrl = json.loads(guest.run("nvme id-ctrl -o json /dev/nvme0"))
    ns = json.loads(guest.run(f"nvme id-ns -o json {ALONE}"))
    target = formatted["record"]["target"]
    assert (target["model"], target["serial"], target["firmware"]) == (
        ctrl["mn"].strip(), ctrl["sn"].strip(), ctrl["fr"].strip())
    assert (target["model"], target["serial"]) == ("QEMU NVMe Ctrl", "VMLAB0")
    kept = target["details"]["nvme_id_ctrl"]
    for key in ("vid", "cntlid", "oacs", "lpa", "fna", "vwc", "sanicap", "nn"):
        assert kept[key] == ctrl[key], key
    namespace = target["details"]["nvme_namespace"]
    lbaf = ns["flbas"] & 0xF
    assert namespace == {"nsid": int(guest.run(f"nvme get-ns-id {ALONE}").split(":")[-1]),
                         "lba_format": lbaf, "lba_data_bytes": 1 << ns["lbafs"][lbaf]["ds"],
                         "lba_metadata_bytes": ns["lbafs"][lbaf]["ms"],
                         "lba_formats": ns["nlbaf"] + 1}
    assert namespace["nsid"] == 1 and namespace["lba_data_bytes"] == 512
    show = formatted["show"]
    assert (f"model QEMU NVMe Ctrl, serial VMLAB0, firmware {ctrl['fr'].strip()}, "
            f"{SIZE:,} bytes, sectors 512/512 B") in show, show
    assert ("NVMe namespace 1 of controller 0, LBA format 0 (512 B data + 0 B metadata), "
            "sanitize not supported (sanicap 0)") in show, show
    print(f"identity: {target['model']} {target['serial']} firmware {target['firmware']}, "
          f"namespace {namespace}", file=sys.stderr)


def one_line_refusal(done: subprocess.CompletedProcess[str]) -> str:
    """A refusal: exit 3 (target refused), one line on stderr, nothing on stdout."""
    message = done.stderr.strip()
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert "\n" not in message and message, message
    return message


def test_purge_by_format_nvm_zeroes_the_namespace_and_sanitize_is_refused_unsent(
        guest: Guest, formatted: dict[str, Any]) -> None:
    half = SIZE // 2
    # the half fio never wrote held the pattern, and after the purge reads back as zeros
    assert formatted["before"]["second_half"] == digest(PATTERN, half)
    assert formatted["after"]["second_half"] == digest(0, half)
    test = formatted["record"]["tests"][0]
    steps = [step["detail"] for step in test["steps"] if step["kind"] == "purge"]
    assert len(steps) == 1 and steps[0]["ok"], steps
    assert (steps[0]["method"], steps[0]["path"]) == ("nvme-format", "nvme")
    assert steps[0]["command"] == ["nvme", "format", ALONE, "--ses=1", "--force"]
    assert "purge nvme-format" in formatted["show"]
    assert "purge: nvme-format through nvme: ok" in formatted["show"], formatted["show"]
    # QEMU 7.2 has no sanitize: SANICAP 0, and the command itself is an invalid opcode
    raw = guest.ssh("nvme sanitize /dev/nvme0 -a 2")
    assert raw.returncode != 0 and "Invalid Command Opcode" in raw.stderr + raw.stdout, raw
    fill(guest, ALONE)
    before = sha(guest, ALONE)
    runs = guest.run(f"SSDLAB_STORE={STORE} ssdlab runs")
    message = one_line_refusal(ssdlab(
        guest, f"run pts --target {ALONE} --destroy-data --purge nvme-sanitize {QUICK}"))
    assert "does not support sanitize (Identify Controller SANICAP is 0); nothing was " \
           "sent" in message, message
    assert "--purge nvme-format" in message and "--purge blkdiscard" in message, message
    assert sha(guest, ALONE) == before  # nothing written
    assert guest.run(f"SSDLAB_STORE={STORE} ssdlab runs") == runs  # no run begun
    print(f"sanitize refused: {message}", file=sys.stderr)
    make_blank(guest, ALONE)


READ_RUN = ("--read-only --profile quick --tests iops --block-sizes 4 --mixes 100/0 "
            "--round-seconds 1 --max-rounds 5 --no-precondition")


def test_the_volatile_write_cache_is_recorded_as_the_controller_says(
        guest: Guest, formatted: dict[str, Any]) -> None:
    cache = formatted["record"]["target"]["details"]["write_cache"]
    feature = guest.run(f"nvme get-feature -f 6 -H {ALONE}")
    assert "Volatile Write Cache Enable (WCE): Enabled" in feature, feature
    assert cache == {"sysfs": "write back", "nvme_vwc_present": True, "nvme_vwc": True,
                     "ata_write_cache": None, "scsi_wce": None, "enabled": True,
                     "path": "nvme"}
    assert ("write cache enabled (the drive's volatile write cache feature, NVMe feature 6)"
            "; the kernel: write back") in formatted["show"]
    try:
        guest.run("nvme set-feature /dev/nvme0 -f 6 -v 0")
        assert "(WCE): Disabled" in guest.run(f"nvme get-feature -f 6 -H {ALONE}")
        done = ssdlab(guest, f"run pts --target {ALONE} {READ_RUN}")
        assert done.returncode == 0, done.stderr
        off = export(guest, run_id_of(done.stdout))["target"]["details"]["write_cache"]
    finally:
        guest.run("nvme set-feature /dev/nvme0 -f 6 -v 1")
    # the drive's answer, not the kernel's: Linux keeps "write back" (it follows the
    # presence of a cache, Identify Controller VWC, not the feature)
    assert off["nvme_vwc"] is False and off["enabled"] is False, off
    assert off["nvme_vwc_present"] is True
    print(f"write cache: on {cache}; off {off}", file=sys.stderr)


#: ssdlab's health count of a namespace, as a run reads it (identity, then health log)
HEALTH_OF = """import sys
from ssdlab.targets.health import read_health
from ssdlab.targets.identity import identify_block
target = identify_block(sys.argv[1])
reading = read_health(target.path, target.details)
print(reading.host_bytes_written, reading.source)
"""


def test_the_smart_logs_data_units_written_match_fios_bytes(
        guest: Guest, formatted: dict[str, Any]) -> None:
    record = formatted["record"]
    fio_bytes = sum(event["detail"]["total"]["host_write_bytes"]
                    for event in record["events"] if event["kind"] == "devices")
    health = [event["detail"] for event in record["events"] if event["kind"] == "health"]
    assert [h["when"] for h in health] == ["start", "end"]
    assert {h["source"] for h in health} == {"nvme smart-log, namespace 1"}
    recorded = health[1]["host_bytes_written"] - health[0]["host_bytes_written"]
    units = formatted["after"]["units"] - formatted["before"]["units"]
    # the run's readings are the controller's count (the format wrote no data units)
    assert recorded == units * DATA_UNIT
    assert fio_bytes > 0 and abs(recorded - fio_bytes) < DATA_UNIT, (recorded, fio_bytes)
    print(f"endurance: fio wrote {fio_bytes:,} bytes; the SMART log {units} data units "
          f"({recorded:,} bytes), {recorded - fio_bytes:+,} bytes", file=sys.stderr)
    # on nvme1, the namespace's own log: writes to nvme1n2 are not nvme1n1's
    guest.run("cat > /tmp/health.py", stdin=HEALTH_OF.encode())
    read = f"cd /tmp && /opt/ssdlab/bin/python3 /tmp/health.py {FIRST}"
    first_before, whole_before = guest.run(read).split(" ", 1)[0], units_written(guest, FIRST)
    guest.run(f"dd if=/dev/urandom of={SECOND} bs=1M count=4 oflag=direct status=none")
    first_after = guest.run(read)
    assert first_after.split(" ", 1)[0] == first_before, first_after
    assert first_after.split(" ", 1)[1].strip() == "nvme smart-log, namespace 1"
    # the controller's count moved by 4 MiB: 8192 sectors, 8 or 9 units as it rounds up
    assert units_written(guest, FIRST) - whole_before in (8, 9)
    make_blank(guest, SECOND)


#: the destructive paths: a write run, and the NVMe purges (a format erases the whole
#: namespace, a sanitize the whole controller)
DESTRUCTIVE = ("", "--purge nvme-format", "--purge nvme-sanitize")


#: ssdlab's command line run in one Python process for each line of stdin (its exit code,
#: stdout and stderr, as JSON): a guest under software emulation takes 3-4 s to start
#: ssdlab, and a refusal stops before anything stateful (the sanitize refusal above is a
#: process of its own: the exit status of the command itself)
REFUSALS = """import contextlib, io, json, shlex, sys
from ssdlab.cli.main import main
done = []
for line in sys.stdin.read().splitlines():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(shlex.split(line))
    done.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(done))
"""


def refused_unwritten(guest: Guest, target: str, consent: str, expected: str,
                      *watched: str) -> list[str]:
    """Each destructive path on ``target`` refused in one line saying ``expected``, and
    the namespaces (``target`` and ``watched``) hash the same before and after."""
    before = {device: sha(guest, device) for device in (target, *watched)}
    lines = [f"run pts --target {target} {consent} {path} {QUICK}" for path in DESTRUCTIVE]
    results = json.loads(guest.run(
        f"cd /tmp && SSDLAB_STORE={STORE} /opt/ssdlab/bin/python3 -c "
        f"{shlex.quote(REFUSALS)}", stdin="\n".join(lines).encode(), timeout=900))
    messages = []
    for path, (code, out, err) in zip(DESTRUCTIVE, results, strict=True):
        message = one_line_refusal(subprocess.CompletedProcess(path, code, out, err))
        assert expected in message, (path, message)
        messages.append(message)
    assert {device: sha(guest, device) for device in before} == before
    return messages


def test_guardrails_refuse_file_systems_mounts_and_a_controller_in_use(guest: Guest) -> None:
    runs = guest.run(f"SSDLAB_STORE={STORE} ssdlab runs")
    # no lazy initialisation: an idle file system writes nothing while it is watched
    mkfs = "mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0"
    try:
        guest.run(f"{mkfs} {ALONE}")
        seen = refused_unwritten(guest, ALONE, "--destroy-data", f"{ALONE} carries ")
        guest.run(f"mkdir -p /mnt/alone && mount -o ro {ALONE} /mnt/alone")
        seen += refused_unwritten(guest, ALONE, f"--destroy-data={ALONE}",
                                  f"{ALONE} is mounted on /mnt/alone")
        guest.run(f"{mkfs} {FIRST} && mkdir -p /mnt/first && mount -o ro {FIRST} /mnt/first")
        seen += refused_unwritten(
            guest, SECOND, f"--destroy-data={SECOND}",
            f"it shares controller nvme1 with {FIRST}, which is mounted on /mnt/first",
            FIRST)
        guest.run("umount /mnt/first")
        # the serial is the controller's: it confirms neither of its namespaces
        seen += refused_unwritten(guest, SECOND, "--destroy-data=VMLAB1",
                                  "but that is its controller's, shared by", FIRST)
    finally:
        guest.ssh("umount /mnt/alone; umount /mnt/first")
    assert guest.run(f"SSDLAB_STORE={STORE} ssdlab runs") == runs  # no run begun
    for message in dict.fromkeys(seen):
        print(f"refused: {message}", file=sys.stderr)
    make_blank(guest, ALONE, FIRST, SECOND)
