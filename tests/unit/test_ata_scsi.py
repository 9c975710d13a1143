"""SATA and SCSI disks (targets/ata_scsi.py): identity, write cache and erase through
each command set, and the purge methods built on them (targets/purge.py), against the
outputs of QEMU 7.2's AHCI and virtio-scsi disks in the VM lab's Debian 12 guest
(tests/fixtures/ata_scsi/) and of real drives in hdparm's format."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from ssdlab.errors import TargetError
from ssdlab.plan.results import PurgeStep
from ssdlab.report.parts import drive_paths_text, purge_text, write_cache_text
from ssdlab.targets import ata_scsi
from ssdlab.targets.ata_scsi import (
    command_set,
    discard_command_name,
    identify_sd,
    parse_hdparm_identify,
    parse_lbp_vpd,
    parse_security,
    parse_sg_inq,
)
from ssdlab.targets.identity import TargetInfo, describe_block
from ssdlab.targets.purge import PurgeOutcome, purge_block, strongest_erase

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ata_scsi"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


#: the Security section of a SATA SSD whose firmware froze its security at boot (hdparm
#: 9.x prints a tab, "not" or nothing, a tab, the word)
SECURITY_FROZEN = """\
Security:
\tMaster password revision code = 65534
\t\tsupported
\tnot\tenabled
\tnot\tlocked
\t\tfrozen
\tnot\texpired: security count
\t\tsupported: enhanced erase
\t2min for SECURITY ERASE UNIT. 8min for ENHANCED SECURITY ERASE UNIT.
Checksum: correct
"""
SECURITY_READY = SECURITY_FROZEN.replace("\t\tfrozen", "\tnot\tfrozen")
SECURITY_PASSWORD_SET = SECURITY_READY.replace("\tnot\tenabled", "\t\tenabled")
SECURITY_NO_ENHANCED = SECURITY_READY.replace("\t\tsupported: enhanced", "\tnot\tsupported: "
                                              "enhanced")


# --------------------------------------------------------------------------- parsing


def test_qemu_sata_disk_identity_through_hdparm() -> None:
    found = parse_hdparm_identify(_text("hdparm_I_qemu_ide_hd.txt"))
    assert (found["model"], found["serial"], found["firmware"]) == (
        "VMLAB-SATA", "VMLABSATA0", "2.5+")
    assert found["security"] == {"supported": False}  # QEMU has no Security section
    assert found["write_cache"] == {"supported": True, "enabled": True}
    # hdparm prints no DATA SET MANAGEMENT line for an ATA-7 disk: smartctl says TRIM
    assert found["trim"] == {"supported": False, "deterministic": False, "zeroes": False}
    assert found["sanitize"] is False


@pytest.mark.parametrize(("text", "expected"), [
    (SECURITY_FROZEN, {"supported": True, "enabled": False, "locked": False, "frozen": True,
                       "enhanced_erase": True, "erase_minutes": 2}),
    (SECURITY_READY, {"supported": True, "enabled": False, "locked": False, "frozen": False,
                      "enhanced_erase": True, "erase_minutes": 2}),
    (SECURITY_PASSWORD_SET, {"supported": True, "enabled": True, "locked": False,
                             "frozen": False, "enhanced_erase": True, "erase_minutes": 2}),
    (SECURITY_NO_ENHANCED, {"supported": True, "enabled": False, "locked": False,
                            "frozen": False, "enhanced_erase": False, "erase_minutes": 2}),
    ("/dev/sdb:\n\nATA device\n", {"supported": False}),
])
def test_the_security_section(text: str, expected: dict[str, object]) -> None:
    assert parse_security("ATA device\n" + text) == expected


def test_qemu_scsi_disk_identity_through_sg_inq_and_the_provisioning_page() -> None:
    assert parse_sg_inq(_text("sg_inq_qemu_scsi_hd.txt")) == {
        "vendor": "QEMU", "product": "QEMU HARDDISK", "revision": "2.5+",
        "serial": "VMLABSCSI0"}
    assert parse_lbp_vpd(_text("sg_vpd_lbpv_qemu_scsi_hd.txt")) == {
        "unmap": True, "write_same_unmap": True, "zeroes": False}
    assert parse_lbp_vpd("") == {"unmap": None, "write_same_unmap": None, "zeroes": None}


# --------------------------------------------------------------------------- sysfs


def _disk(root: Path, name: str, *, ata: bool, mode: str | None = None) -> Path:
    """A fake /sys with the whole disk NAME (a libata port's, or a SCSI HBA's)."""
    host = "ata3/host2/target2:0:0/2:0:0:0" if ata else "virtio2/host0/target0:0:0/0:0:0:0"
    device = root / "devices" / "pci0000:00" / host
    disk = device / "block" / name
    (disk / "queue").mkdir(parents=True)
    (disk / "device").symlink_to(device)
    if mode is not None:
        (device / "scsi_disk" / "0:0:0:0").mkdir(parents=True)
        (device / "scsi_disk" / "0:0:0:0" / "provisioning_mode").write_text(mode + "\n")
    (root / "class" / "block").mkdir(parents=True, exist_ok=True)
    (root / "class" / "block" / name).symlink_to(disk)
    return root


def test_the_command_set_of_a_disk(tmp_path: Path) -> None:
    _disk(tmp_path, "sda", ata=True)
    _disk(tmp_path, "sdb", ata=False, mode="unmap")
    assert command_set("sda", sysfs=tmp_path) == "ata"
    assert command_set("sdb", sysfs=tmp_path) == "scsi"
    assert command_set("nvme0n1", sysfs=tmp_path) is None
    assert discard_command_name("sda", "ata", sysfs=tmp_path) == "ATA DATA SET MANAGEMENT TRIM"
    assert discard_command_name("sdb", "scsi", sysfs=tmp_path) == "SCSI UNMAP"
    assert str(discard_command_name("nvme0n1", "nvme", sysfs=tmp_path)).startswith("NVMe")
    assert discard_command_name("loop0", None, sysfs=tmp_path) is None


Reply = tuple[int, str, str]


class Answers:
    """Answers commands by their first words (the longest listed prefix) with (exit
    status, stdout, stderr); a missing tool where none is listed."""

    def __init__(self, answers: dict[str, Reply | list[Reply]]) -> None:
        self.answers: dict[str, list[Reply]] = {
            key: value if isinstance(value, list) else [value] for key, value in answers.items()}
        self.calls: list[list[str]] = []

    def __call__(self, command: list[str], **_kwargs: object) -> subprocess.CompletedProcess[str]:
        self.calls.append(command)
        line = " ".join(command)
        keys = sorted((k for k in self.answers if line.startswith(k)), key=len, reverse=True)
        if not keys:
            raise FileNotFoundError(2, "No such file or directory", command[0])
        queue = self.answers[keys[0]]
        code, out, err = queue.pop(0) if len(queue) > 1 else queue[0]
        return subprocess.CompletedProcess(command, code, out, err)


def test_identity_names_its_path_and_overlays_the_drive_strings(tmp_path: Path) -> None:
    _disk(tmp_path, "sda", ata=True)
    _disk(tmp_path, "sdb", ata=False, mode="unmap")
    runner = Answers({"hdparm -I": (0, _text("hdparm_I_qemu_ide_hd.txt"), ""),
                      "smartctl -j -i": (0, _text("smartctl_i_qemu_ide_hd.json"), ""),
                      "sg_inq": (0, _text("sg_inq_qemu_scsi_hd.txt"), ""),
                      "sg_vpd": (0, _text("sg_vpd_lbpv_qemu_scsi_hd.txt"), "")})
    which = lambda tool: f"/usr/bin/{tool}"  # noqa: E731
    sata = describe_block("sda", sysfs=tmp_path, runner=runner, which=which)
    scsi = describe_block("sdb", sysfs=tmp_path, runner=runner, which=which)
    assert (sata.model, sata.serial, sata.details["identity_path"]) == (
        "VMLAB-SATA", "VMLABSATA0", "ata")
    assert (scsi.model, scsi.serial, scsi.firmware, scsi.details["identity_path"]) == (
        "QEMU HARDDISK", "VMLABSCSI0", "2.5+", "scsi")
    assert sata.details["identify"]["trim"] == {  # type: ignore[index]
        "supported": True, "deterministic": True, "zeroes": False}
    assert sata.details["identify"]["commands"] == ["hdparm -I", "smartctl -i"]  # type: ignore[index]
    identify = scsi.details["identify"]
    assert isinstance(identify, dict)
    assert identify["provisioning"] == {"unmap": True, "write_same_unmap": True,
                                        "zeroes": False}
    assert identify["provisioning_mode"] == "unmap"
    assert runner.calls == [["hdparm", "-I", "/dev/sda"], ["smartctl", "-j", "-i", "/dev/sda"],
                            ["sg_inq", "/dev/sdb"], ["sg_vpd", "-p", "lbpv", "/dev/sdb"]]


def test_identity_falls_back_to_smartctl_then_to_sysfs(tmp_path: Path) -> None:
    _disk(tmp_path, "sda", ata=True)
    smart = '{"model_name": "Samsung SSD 870 EVO 1TB", "serial_number": "S6P", ' \
            '"firmware_version": "SVT02B6Q"}'
    found = identify_sd("sda", "/dev/sda", sysfs=tmp_path,
                        run=Answers({"smartctl -j -i": (0, smart, "")}))
    assert (found["path"], found["model"], found["commands"]) == (
        "ata", "Samsung SSD 870 EVO 1TB", ["smartctl -i"])
    assert "hdparm is not installed (package hdparm)" in str(found["note"])
    nothing = identify_sd("sda", "/dev/sda", sysfs=tmp_path, run=Answers({}))
    assert "smartctl is not installed" in str(nothing["error"])
    info = describe_block("sda", sysfs=tmp_path, runner=Answers({}), which=lambda _t: None)
    assert info.details["identity_path"] == "sysfs"


# --------------------------------------------------------------------------- purge


def sd(name: str = "sdb", path: str = "ata", security: dict[str, object] | None = None,
       bus: str = "ata", **details: object) -> TargetInfo:
    identify: dict[str, object] = {"path": path, "bus": bus}
    if security is not None:
        identify["security"] = security
    return TargetInfo(path=f"/dev/{name}", kind="block", name=name, device_class="sata_ssd",
                      model="M", serial="S", firmware="F", capacity_bytes=1 << 27,
                      logical_sector_bytes=512, physical_sector_bytes=512, rotational=False,
                      numa_node=None, scheduler="none", discard_max_bytes=1 << 31,
                      details={"identity_path": path, "identify": identify, **details})


def has_all(tool: str) -> str:
    return f"/usr/sbin/{tool}"


READY = parse_security(SECURITY_READY)
ABORTED = ("SG_IO: bad/missing sense data, sb[]:  70 00 0b 00 00 00 00 0a 04 41 40 01 00 00 "
           "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n")


@pytest.mark.parametrize(("info", "expected", "why"), [
    (sd(security=READY), "ata-secure-erase", ""),
    (sd(security={"supported": False}), None, "no ATA Security feature set"),
    (sd(), None, "could not read the drive's ATA security state"),  # hdparm missing
    (sd(security=parse_security(SECURITY_FROZEN)), None, "frozen"),
    (sd(security=parse_security(SECURITY_PASSWORD_SET)), None, "user password"),
    (sd(path="scsi"), "scsi-sanitize", ""),
    (sd(name="sdb1", partition_of="sdb", security=READY), None, "partition"),
    (sd(name="nvme0n1", path="nvme"), None, ""),
    (sd(security=READY, bus="usb"), None, "attached through a USB or UAS bridge"),
    (sd(security=READY, bus="sas"), None, "a SAS HBA"),
    (sd(security=READY, bus="other"), None, "only to a disk on a libata port"),
    (sd(path="scsi", bus="usb"), "scsi-sanitize", ""),
])
def test_auto_takes_the_strongest_erase_the_drive_supports(
        info: TargetInfo, expected: str | None, why: str) -> None:
    method, reason = strongest_erase(info)
    assert method == expected
    assert why in reason


def test_ata_secure_erase_is_judged_by_the_drive_state_not_by_hdparm_status() -> None:
    """QEMU aborts SECURITY SET PASSWORD and hdparm exits 0: nothing was erased."""
    runner = Answers({"hdparm --user-master u --security-set-pass": (0, "", ABORTED),
                      "hdparm -I": (0, _text("hdparm_I_qemu_ide_hd.txt"), "")})
    outcome = purge_block(sd(security={"supported": False}), "ata-secure-erase", 0, 1 << 27,
                          runner=runner, which=has_all)
    assert (outcome.method, outcome.ok, outcome.path) == ("ata-secure-erase", False, "ata")
    assert "the drive did not take a password" in outcome.detail
    assert "hdparm exited 0 (the drive aborted it: sense key 0x0b)" in outcome.detail
    assert "no Security feature set" in outcome.detail
    assert "the fallback is --purge blkdiscard" in outcome.detail
    assert [c[:4] for c in runner.calls] == [
        ["hdparm", "--user-master", "u", "--security-set-pass"], ["hdparm", "-I", "/dev/sdb"]]


def test_auto_falls_back_to_blkdiscard_and_names_the_fallback(tmp_path: Path) -> None:
    _disk(tmp_path, "sdb", ata=True)
    runner = Answers({"hdparm --user-master u --security-set-pass": (0, "", ABORTED),
                      "hdparm -I": (0, "ATA device\n" + SECURITY_READY, ""),
                      "blkdiscard": (0, "", "")})
    outcome = purge_block(sd(security=READY), "auto", 0, 1 << 27, runner=runner,
                          which=has_all, sysfs=tmp_path)
    assert (outcome.method, outcome.ok, outcome.path, outcome.fallback_from) == (
        "blkdiscard", True, "ata", "ata-secure-erase")
    assert outcome.detail.startswith("ata-secure-erase failed: the drive did not take")
    assert outcome.detail.endswith("fell back to blkdiscard: discarded 134217728 bytes from "
                                   "offset 0 (ATA DATA SET MANAGEMENT TRIM)")
    step = PurgeStep.of(outcome).to_json()
    assert (step["path"], step["fallback_from"]) == ("ata", "ata-secure-erase")


def test_a_secure_erase_that_completes() -> None:
    enabled = "ATA device\n" + SECURITY_PASSWORD_SET
    cleared = "ATA device\n" + SECURITY_READY
    runner = Answers({"hdparm --user-master u --security-set-pass": (0, "", ""),
                      "hdparm --user-master u --security-erase": (0, "", ""),
                      "hdparm -I": [(0, enabled, ""), (0, cleared, "")]})
    outcome = purge_block(sd(security=READY), "auto", 0, 1 << 27, runner=runner,
                          which=has_all)
    assert (outcome.method, outcome.ok, outcome.fallback_from) == (
        "ata-secure-erase", True, None)
    assert outcome.command == ("hdparm", "--user-master", "u", "--security-erase", "ssdlab",
                               "/dev/sdb")
    assert "SECURITY ERASE UNIT completed" in outcome.detail


def test_a_failed_erase_removes_the_temporary_password() -> None:
    enabled = "ATA device\n" + SECURITY_PASSWORD_SET
    cleared = "ATA device\n" + SECURITY_READY
    runner = Answers({"hdparm --user-master u --security-set-pass": (0, "", ""),
                      "hdparm --user-master u --security-erase": (0, "", ABORTED),
                      "hdparm --user-master u --security-disable": (0, "", ""),
                      "hdparm -I": [(0, enabled, ""), (0, enabled, ""), (0, cleared, "")]})
    outcome = purge_block(sd(security=READY), "ata-secure-erase", 0, 1 << 27, runner=runner,
                          which=has_all)
    assert not outcome.ok
    assert "SECURITY ERASE UNIT did not complete" in outcome.detail
    assert "the temporary password was removed" in outcome.detail
    assert ["hdparm", "--user-master", "u", "--security-disable", "ssdlab",
            "/dev/sdb"] in runner.calls


def test_scsi_sanitize_that_qemu_refuses_falls_back_under_auto(tmp_path: Path) -> None:
    _disk(tmp_path, "sdb", ata=False, mode="unmap")
    said = "Sanitize failed: Illegal request, Invalid opcode\n"
    runner = Answers({"sg_sanitize": (ata_scsi.SG_INVALID_OPCODE, "", said),
                      "blkdiscard": (0, "", "")})
    named = purge_block(sd(path="scsi"), "scsi-sanitize", 0, 1 << 27, runner=runner,
                        which=has_all)
    assert (named.ok, named.path) == (False, "scsi")
    assert "does not support SANITIZE (invalid opcode)" in named.detail
    auto = purge_block(sd(path="scsi"), "auto", 0, 1 << 27, runner=runner, which=has_all,
                       sysfs=tmp_path)
    assert (auto.method, auto.ok, auto.fallback_from, auto.path) == (
        "blkdiscard", True, "scsi-sanitize", "scsi")
    assert auto.detail.endswith("(SCSI UNMAP)")
    assert runner.calls[0] == ["sg_sanitize", "--block", "--quick", "/dev/sdb"]


def test_auto_says_why_it_chose_blkdiscard(tmp_path: Path) -> None:
    _disk(tmp_path, "sdb", ata=True)
    runner = Answers({"blkdiscard": (0, "", "")})
    outcome = purge_block(sd(security=parse_security(SECURITY_FROZEN)), "auto", 0, 1 << 27,
                          runner=runner, which=has_all, sysfs=tmp_path)
    assert (outcome.method, outcome.fallback_from) == ("blkdiscard", None)
    assert "auto chose blkdiscard: the drive's ATA security is frozen" in outcome.detail
    assert [c[0] for c in runner.calls] == ["blkdiscard"]
    missing = purge_block(sd(path="scsi"), "auto", 0, 1 << 27, runner=runner,
                          which=lambda t: None if t == "sg_sanitize" else t, sysfs=tmp_path)
    assert "sg_sanitize is not installed (package sg3-utils)" in missing.detail


def test_undecodable_output_is_replaced_not_fatal() -> None:
    """sg_sanitize prints the LU name's binary NAA bytes (in the guest: "LU name: \\xa8...");
    the output is read with errors="replace", and a runner that still fails to decode is
    an outcome, not a crash."""
    seen: list[object] = []

    def decoding(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(kwargs.get("errors"))
        raise UnicodeDecodeError("utf-8", b"\xa8", 0, 1, "invalid start byte")

    outcome = purge_block(sd(path="scsi"), "scsi-sanitize", 0, 1, runner=decoding,
                          which=has_all)
    assert seen == ["replace"]
    assert not outcome.ok and "could not run sg_sanitize" in outcome.detail


def test_whole_disk_erases_refuse_other_disks_and_partitions() -> None:
    runner = Answers({})
    with pytest.raises(TargetError, match=r"needs an ATA \(SATA\) disk; /dev/sdb speaks SCSI"):
        purge_block(sd(path="scsi"), "ata-secure-erase", 0, 1, runner=runner, which=has_all)
    with pytest.raises(TargetError, match="it is a partition"):
        purge_block(sd(name="sdb1", path="scsi", partition_of="sdb"), "scsi-sanitize", 0, 1,
                    runner=runner, which=has_all)
    assert runner.calls == []


def test_an_older_purge_step_reads_and_writes_without_the_new_keys() -> None:
    old = {"method": "blkdiscard", "ok": True, "seconds": 1.0, "command": None, "detail": ""}
    assert PurgeStep.from_json(old, "purge").to_json() == old
    step = PurgeStep.of(replace(PurgeOutcome("none", True, 0.0, None, ""), path=None))
    assert "path" not in step.to_json() and "fallback_from" not in step.to_json()


def test_show_says_how_the_drive_was_asked() -> None:
    details = {"identity_path": "scsi",
               "identify": {"commands": ["sg_inq", "sg_vpd -p lbpv"]},
               "write_cache": {"path": "scsi", "enabled": False}}
    assert drive_paths_text({"details": details}) == (
        "identity through scsi (sg_inq, sg_vpd -p lbpv)")
    # the write cache has a line of its own, which names the path it was read through
    state = {"scsi_wce": False, "enabled": False, "path": "scsi", "sysfs": "write through"}
    assert write_cache_text({"details": {"write_cache": state}}) == (
        "disabled (the drive's, through scsi: the caching mode page's WCE); "
        "the kernel: write through")
    assert drive_paths_text({"details": {"write_cache": {"path": None}}}) == ""
    assert drive_paths_text({}) == ""


def test_show_says_what_each_purge_did() -> None:
    fell_back = PurgeStep.of(PurgeOutcome("blkdiscard", True, 0.5, None, "", "scsi",
                                          "scsi-sanitize")).to_json()
    assert purge_text(fell_back) == "blkdiscard through scsi: ok, after scsi-sanitize failed"
    failed = PurgeStep.of(PurgeOutcome("ata-secure-erase", False, 0.1, None, "", "ata"))
    assert purge_text(failed.to_json()) == "ata-secure-erase through ata: FAILED"
    older = {"method": "blkdiscard", "ok": True, "seconds": 1.0, "command": None, "detail": ""}
    assert purge_text(older) == "blkdiscard: ok"
