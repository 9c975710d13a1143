"""SATA and SCSI drives for real (issue 32, build item 6): a guest with one disk on QEMU's
AHCI controller and one on a virtio-scsi HBA. ssdlab reads each one's identity through
its command set (ATA: hdparm -I and smartctl; SCSI: sg_inq and the provisioning VPD
page), its write cache through the ATA feature (hdparm -W) and the SCSI caching mode page
(sdparm WCE), and purges it with the strongest erase it supports. QEMU's disks have
neither ATA security nor SCSI SANITIZE: ``auto`` trims instead and says why, or which
erase it fell back from; a named erase fails, erases nothing and names the fallback. Each
path is in the run's record, read back with ``ssdlab export`` and ``ssdlab show`` in the
guest. A purge is judged by what is guaranteed: the trim reached the drive (the scratch
file backing it on the host gives its blocks back); QEMU promises no zeros (SCSI
LBPRZ=0, ATA TRIM without "read zeros"), so what the drive reads back is only printed.
One guest for the module; every test leaves its drives blank, their write cache on."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.vmlab import GUEST_VENV, Drive, Guest, VmLab
from tests.vmlab.conftest import VMLAB_TEST_TIMEOUT_S

pytestmark = [pytest.mark.root, pytest.mark.vmlab, pytest.mark.timeout(VMLAB_TEST_TIMEOUT_S)]

MiB = 1 << 20
SIZE = 128 * MiB
SATA, SCSI = 0, 1
STORE = "/root/sata-scsi-test.sqlite"
#: the smallest PTS run with a purge: one cell of 4 KiB random writes on the first half of
#: the drive (64 MiB, the least ssdlab takes), 5 rounds of 1 s (the SNIA window), no
#: preconditioning
QUICK = ("--profile quick --tests iops --block-sizes 4 --mixes 0/100 --round-seconds 1 "
         "--max-rounds 5 --active-range 50 --no-precondition")
#: ssdlab's purge of a whole drive, as a run does it: identity, then purge_block
PURGE = """
import json, sys
from ssdlab.targets.identity import identify_block
from ssdlab.targets.purge import purge_block
info = identify_block(sys.argv[1])
out = purge_block(info, sys.argv[2], 0, info.capacity_bytes)
print(json.dumps({"method": out.method, "ok": out.ok, "path": out.path,
                  "fallback_from": out.fallback_from, "detail": out.detail}))
"""


@pytest.fixture(scope="module")
def guest(vmlab: VmLab) -> Iterator[Guest]:
    with vmlab.guest([Drive.scratch(SIZE, "sata"), Drive.scratch(SIZE, "scsi")]) as running:
        yield running


def allocated(guest: Guest, index: int) -> int:
    """Bytes the drive's scratch file holds on the host (its allocated blocks)."""
    return os.stat(guest.drive_path(index)).st_blocks * 512


def fill(guest: Guest, index: int) -> None:
    """Write the whole drive, direct: every block reaches the file on the host."""
    guest.run(f"dd if=/dev/urandom of={guest.device(index)} bs=1M count={SIZE // MiB} "
              "oflag=direct status=none")
    assert allocated(guest, index) >= SIZE - MiB


def blank(guest: Guest, index: int) -> None:
    """Trim the whole drive and check that nothing is left on it or on the host."""
    device = guest.device(index)
    guest.run(f"blkdiscard -f {device} && wipefs -a {device} >/dev/null")
    assert guest.ssh(f"blkid -p {device}").returncode == 2
    assert allocated(guest, index) <= MiB


def quick_run(guest: Guest, index: int, purge: str) -> tuple[dict[str, Any], str]:
    """A quick PTS run on drive ``index`` with ``--purge purge``: its exported record and
    what ``ssdlab show`` prints of it."""
    out = guest.run(f"SSDLAB_STORE={STORE} ssdlab run pts --target {guest.device(index)} "
                    f"--destroy-data --purge {purge} {QUICK}", timeout=900)
    found = re.search(r"^run (\S+) complete", out, re.M)
    assert found, out
    record: dict[str, Any] = json.loads(
        guest.run(f"SSDLAB_STORE={STORE} ssdlab export {found[1]} --format json"))
    assert record["run"]["status"] == "complete", record["run"]
    return record, guest.run(f"SSDLAB_STORE={STORE} ssdlab show {found[1]}")


def run_with_the_cache_off(guest: Guest, index: int, off: str,
                          on: str) -> tuple[dict[str, Any], str]:
    """The drive filled, its own write cache off (``off DEVICE``: the record must say
    so), a quick run with ``--purge auto``, the cache on again (``on DEVICE``)."""
    device = guest.device(index)
    fill(guest, index)
    guest.run(f"{off} {device}")
    try:
        return quick_run(guest, index, "auto")
    finally:
        guest.run(f"{on} {device}")


def purge_step(record: dict[str, Any]) -> dict[str, Any]:
    [step] = [step["detail"] for test in record["tests"] for step in test["steps"]
              if step["kind"] == "purge"]
    assert isinstance(step, dict)
    return step


def purge_whole(guest: Guest, index: int, method: str) -> dict[str, Any]:
    """ssdlab's purge of the whole drive by ``method``, in the guest."""
    done: dict[str, Any] = json.loads(guest.run(
        f"cd /tmp && {GUEST_VENV}/bin/python3 -c {shlex.quote(PURGE)} "
        f"{guest.device(index)} {method}"))
    return done


def test_the_drives_sit_on_their_buses_as_ssds(guest: Guest) -> None:
    sata, scsi = guest.device(SATA), guest.device(SCSI)
    listed = guest.run(f"lsblk -dn -o NAME,ROTA,SERIAL,MODEL {sata} {scsi}")
    assert re.search(rf"^{sata[5:]}\s+0\s+VMLABSATA0\s+VMLAB-SATA$", listed, re.M), listed
    assert re.search(rf"^{scsi[5:]}\s+0\s+VMLABSCSI0\s+QEMU HARDDISK$", listed, re.M), listed
    assert "/ata" in guest.run(f"readlink -f /sys/block/{sata[5:]}")
    assert "/virtio" in guest.run(f"readlink -f /sys/block/{scsi[5:]}")
    assert guest.run("ls /dev/nvme* 2>/dev/null || true").strip() == ""


def test_sata_identity_write_cache_and_purge_through_the_ata_path(guest: Guest) -> None:
    device = guest.device(SATA)
    record, shown = run_with_the_cache_off(guest, SATA, "hdparm -W0", "hdparm -W1")
    target, details = record["target"], record["target"]["details"]
    assert (target["model"], target["serial"], target["firmware"], target["device_class"]) == (
        "VMLAB-SATA", "VMLABSATA0", "2.5+", "sata_ssd")
    assert details["identity_path"] == "ata"
    identify = details["identify"]
    assert identify["commands"] == ["hdparm -I", "smartctl -i"]
    assert identify["security"] == {"supported": False}  # QEMU: no ATA Security
    assert identify["trim"] == {"supported": True, "deterministic": True, "zeroes": False}
    cache = details["write_cache"]
    assert (cache["path"], cache["ata_write_cache"], cache["enabled"]) == ("ata", False, False)
    purge = purge_step(record)
    assert (purge["method"], purge["ok"], purge["path"]) == ("blkdiscard", True, "ata")
    assert "fallback_from" not in purge  # auto never tried an erase the drive lacks
    assert "(ATA DATA SET MANAGEMENT TRIM); auto chose blkdiscard: the drive reports no ATA " \
           "Security feature set" in purge["detail"]
    assert "drive: identity through ata (hdparm -I, smartctl -i)" in shown, shown
    assert "write cache disabled (the drive's, through ata: hdparm -W)" in shown, shown
    assert "purge: blkdiscard through ata: ok" in shown, shown
    assert "write-caching =  1 (on)" in guest.run(f"hdparm -W {device}")
    blank(guest, SATA)


def test_a_named_ata_secure_erase_is_judged_by_the_drive_not_by_hdparm(guest: Guest) -> None:
    """QEMU aborts SECURITY SET PASSWORD and hdparm exits 0: ssdlab reads the drive's
    security state back, finds no password set, erases nothing, names the fallback."""
    device = guest.device(SATA)
    said = guest.ssh(f"hdparm --user-master u --security-set-pass probe {device}")
    assert said.returncode == 0 and "70 00 0b" in said.stderr  # hdparm's 0, the abort
    # a mark in the last sector, outside the run's active range: no erase may touch it
    last = SIZE // 512 - 1
    guest.run(f"printf ssdlab-mark | dd of={device} bs=512 seek={last} conv=sync,notrunc "
              "oflag=direct status=none")
    record, shown = quick_run(guest, SATA, "ata-secure-erase")
    kept = guest.run(f"dd if={device} bs=512 skip={last} count=1 iflag=direct status=none "
                     "| head -c 11")
    assert kept == "ssdlab-mark"
    purge = purge_step(record)
    assert (purge["method"], purge["ok"], purge["path"]) == ("ata-secure-erase", False, "ata")
    assert "the drive did not take a password (SECURITY SET PASSWORD: hdparm exited 0 (the " \
           "drive aborted it: sense key 0x0b); hdparm -I then shows no Security feature " \
           "set); nothing was erased; the fallback is --purge blkdiscard" in purge["detail"]
    assert purge["command"][:4] == ["hdparm", "--user-master", "u", "--security-set-pass"]
    warnings = [e["message"] for e in record["events"] if e["kind"] == "warning"]
    assert ("purge by ata-secure-erase failed; the test starts from a state that is not "
            "fresh-out-of-box") in warnings, warnings
    assert "purge: ata-secure-erase through ata: FAILED" in shown, shown
    blank(guest, SATA)


def test_scsi_identity_write_cache_and_purge_through_the_scsi_path(guest: Guest) -> None:
    device = guest.device(SCSI)
    record, shown = run_with_the_cache_off(guest, SCSI, "sdparm --clear=WCE",
                                           "sdparm --set=WCE")
    target, details = record["target"], record["target"]["details"]
    assert (target["model"], target["serial"], target["firmware"]) == (
        "QEMU HARDDISK", "VMLABSCSI0", "2.5+")
    assert details["identity_path"] == "scsi"
    identify = details["identify"]
    assert (identify["vendor"], identify["commands"]) == ("QEMU", ["sg_inq", "sg_vpd -p lbpv"])
    assert identify["provisioning"] == {"unmap": True, "write_same_unmap": True,
                                        "zeroes": False}
    assert identify["provisioning_mode"] == "unmap"
    cache = details["write_cache"]
    assert (cache["path"], cache["scsi_wce"], cache["enabled"]) == ("scsi", False, False)
    purge = purge_step(record)
    assert (purge["method"], purge["ok"], purge["path"], purge["fallback_from"]) == (
        "blkdiscard", True, "scsi", "scsi-sanitize")
    assert purge["detail"].startswith(
        "scsi-sanitize failed: the drive does not support SANITIZE (invalid opcode)")
    assert purge["detail"].endswith("(SCSI UNMAP)")
    assert "drive: identity through scsi (sg_inq, sg_vpd -p lbpv)" in shown, shown
    assert ("write cache disabled (the drive's, through scsi: the caching mode page's WCE)"
            in shown), shown
    assert "purge: blkdiscard through scsi: ok, after scsi-sanitize failed" in shown, shown
    assert re.search(r"^WCE\s+1\b", guest.ssh(f"sdparm --get=WCE {device}").stdout, re.M)
    blank(guest, SCSI)


@pytest.mark.parametrize(("index", "fell_back_from", "sent"), [
    (SATA, None, "ATA DATA SET MANAGEMENT TRIM"), (SCSI, "scsi-sanitize", "SCSI UNMAP")])
def test_a_whole_drive_purge_reaches_the_drive(guest: Guest, index: int,
                                               fell_back_from: str | None, sent: str) -> None:
    """``auto`` over the whole drive: the trim reaches QEMU (discard=unmap punches the
    scratch file's holes on the host). Zeros are not promised (LBPRZ=0, no "read zeros
    after TRIM"), so what the drive reads back is only printed."""
    fill(guest, index)
    done = purge_whole(guest, index, "auto")
    assert (done["method"], done["ok"], done["fallback_from"]) == (
        "blkdiscard", True, fell_back_from)
    assert f"discarded {SIZE} bytes from offset 0 ({sent})" in done["detail"]
    left = allocated(guest, index)
    assert left <= MiB, left
    zeros = guest.ssh(f"cmp -s -n {SIZE} {guest.device(index)} /dev/zero").returncode == 0
    print(f"{sent}: {SIZE // MiB} MiB written, {left} bytes left allocated on the host "
          f"after the purge; the drive reads back {'zeros' if zeros else 'not only zeros'}"
          " (not promised)", file=sys.stderr)
    if index == SCSI:  # a named SANITIZE fails, runs nothing else, names the fallback
        named = purge_whole(guest, index, "scsi-sanitize")
        assert (named["method"], named["ok"], named["path"]) == ("scsi-sanitize", False, "scsi")
        assert "invalid opcode" in named["detail"] and "--purge blkdiscard" in named["detail"]
    blank(guest, index)
