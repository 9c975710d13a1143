"""SATA and SCSI disks (targets/ata_scsi.py): identity through each command set, against
the outputs of QEMU 7.2's AHCI and virtio-scsi disks in the VM lab's Debian 12 guest
(tests/fixtures/ata_scsi/) and of real drives in hdparm's format."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ssdlab.report.parts import drive_paths_text
from ssdlab.targets.ata_scsi import (
    command_set,
    identify_sd,
    parse_hdparm_identify,
    parse_lbp_vpd,
    parse_security,
    parse_sg_inq,
)
from ssdlab.targets.identity import describe_block

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



def test_show_says_how_the_drive_was_asked() -> None:
    details = {"identity_path": "scsi",
               "identify": {"commands": ["sg_inq", "sg_vpd -p lbpv"]},
               "write_cache": {"path": "scsi", "enabled": False}}
    assert drive_paths_text({"details": details}) == (
        "identity through scsi (sg_inq, sg_vpd -p lbpv); write cache off, through scsi")
    assert drive_paths_text({"details": {"write_cache": {"path": None}}}) == ""
    assert drive_paths_text({}) == ""
