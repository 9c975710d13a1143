"""A drive's own count of bytes written through smartctl (issue 15, item 7): SATA
attributes and device statistics, NVMe and SAS, on recorded ``smartctl -j`` outputs of real
drives (tests/fixtures/smartctl, SOURCES.md there says where each comes from), and
``read_health`` choosing the tool with a fake runner."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ssdlab.errors import TargetError
from ssdlab.targets.health import (
    DATA_UNIT_BYTES,
    GIB,
    MIB,
    HealthReading,
    parse_smartctl,
    read_health,
    smartctl_command,
    smartctl_failure,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "smartctl"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _reading(name: str) -> HealthReading:
    reading = parse_smartctl(_text(name))
    assert reading is not None, name
    return reading


def test_every_fixture_is_listed_in_sources_and_used_here() -> None:
    sources = _text("SOURCES.md")
    me = Path(__file__).read_text(encoding="utf-8")
    files = sorted(p.name for p in FIXTURES.glob("*.json"))
    assert len(files) >= 9  # real drives of other machines (none of this one's disk)
    for name in files:
        assert f"`{name}`" in sources, f"{name} is not in SOURCES.md"
        assert f'"{name}"' in me, f"no test reads {name}"


# ---------------------------------------------------------------- SATA


def test_ata_device_statistics_come_first_and_agree_with_attribute_241() -> None:
    name = "ata_samsung_860evo_devstat.json"
    reading = _reading(name)
    assert reading.source == "smartctl: ATA device statistics, Logical Sectors Written"
    assert reading.host_bytes_written == 64777770148 * 512
    assert reading.resolution_bytes == 512 and reading.media_bytes_written is None
    doc = json.loads(_text(name))
    [lba241] = [a["raw"]["value"] for a in doc["ata_smart_attributes"]["table"]
                if a["id"] == 241]
    assert lba241 * 512 == reading.host_bytes_written


def test_samsung_total_lbas_written_in_logical_sectors() -> None:
    reading = _reading("ata_samsung_pm883_total_lbas.json")
    assert reading.source == "smartctl: ATA attribute 241 Total_LBAs_Written"
    assert (reading.host_bytes_written, reading.resolution_bytes) == (1375952821 * 512, 512)
    # 251 NAND_Writes does not name its unit: not read
    assert reading.media_bytes_written is None


def test_intel_host_and_nand_writes_in_32_mib_units() -> None:
    reading = _reading("ata_intel_s4510_host_writes_32mib.json")
    assert reading.source == "smartctl: ATA attribute 225 Host_Writes_32MiB"
    assert reading.host_bytes_written == 2575247 * 32 * MIB
    assert reading.resolution_bytes == 32 * MIB
    assert (reading.media_bytes_written, reading.media_resolution_bytes) == (
        12186490 * 32 * MIB, 32 * MIB)


def test_a_named_unit_wins_over_a_default_total_lbas_written() -> None:
    """The Dell S3520 repeats its 32 MiB count under 233 and 241 "Total_LBAs_Written"."""
    reading = _reading("ata_dell_intel_s3520_mislabelled_241.json")
    assert reading.source == "smartctl: ATA attribute 225 Host_Writes_32MiB"
    assert reading.host_bytes_written == 129493 * 32 * MIB  # 4.3 TB, not 66 MB


def test_micron_counts_lbas_in_attribute_246_and_pages_are_not_read() -> None:
    reading = _reading("ata_micron_5300_attr246.json")
    assert reading.source == "smartctl: ATA attribute 246 Total_LBAs_Written"
    assert reading.host_bytes_written == 130006927240 * 512
    assert reading.media_bytes_written is None


def test_kingston_counts_host_and_flash_writes_in_gib() -> None:
    name = "ata_kingston_a400_lifetime_writes_gib.json"
    reading = _reading(name)
    assert reading.source == "smartctl: ATA attribute 241 Lifetime_Writes_GiB"
    assert (reading.host_bytes_written, reading.resolution_bytes) == (398 * GIB, GIB)
    assert (reading.media_bytes_written, reading.media_resolution_bytes) == (979 * GIB, GIB)
    assert json.loads(_text(name))["smartctl"]["exit_status"] == 4
    assert smartctl_failure(_text(name), 4) is None


def test_a_hard_disk_without_a_write_count_gives_none() -> None:
    assert parse_smartctl(_text("ata_hdd_wd_red_no_count.json")) is None


@pytest.mark.parametrize(("name", "unit"), [
    ("Host_Writes_GiB", GIB), ("Total_Writes_GiB", GIB), ("Lifetime_Writes_GiB", GIB),
    ("Host_Writes_32MiB", 32 * MIB),
])
def test_attribute_names_with_units(name: str, unit: int) -> None:
    doc = {"logical_block_size": 512, "ata_smart_attributes": {"table": [
        {"id": 241, "name": name, "raw": {"value": 11378, "string": "11378"}},
        {"id": 249, "name": "NAND_Writes_1GiB", "raw": {"value": 9000, "string": "9000"}}]}}
    reading = parse_smartctl(json.dumps(doc))
    assert reading is not None
    assert (reading.host_bytes_written, reading.resolution_bytes) == (11378 * unit, unit)
    assert reading.media_bytes_written == 9000 * GIB


def test_total_lbas_written_uses_the_logical_block_size_and_says_when_it_is_a_guess() -> None:
    doc = {"logical_block_size": 4096, "in_smartctl_database": False,
           "ata_smart_attributes": {"table": [
               {"id": 241, "name": "Total_LBAs_Written", "raw": {"value": 10}}]}}
    reading = parse_smartctl(json.dumps(doc))
    assert reading is not None and reading.host_bytes_written == 40960
    assert reading.resolution_bytes == 4096
    assert "not in smartctl's database" in reading.source


def test_invalid_device_statistics_and_bad_raw_values_are_skipped() -> None:
    doc = {"ata_device_statistics": {"pages": [{"number": 1, "table": [
        {"name": "Logical Sectors Written", "value": 5, "flags": {"valid": False}}]}]},
        "ata_smart_attributes": {"table": [
            {"id": 241, "name": "Total_LBAs_Written", "raw": {"value": -1}},
            {"id": 241, "name": "Total_LBAs_Written", "raw": {"value": True}}]}}
    assert parse_smartctl(json.dumps(doc)) is None


# ---------------------------------------------------------------- NVMe and SAS


def test_nvme_through_smartctl_counts_data_units() -> None:
    reading = _reading("nvme_samsung_970_evo_plus.json")
    assert reading.source == "smartctl: NVMe data units written"
    assert reading.host_bytes_written == 1969459 * DATA_UNIT_BYTES
    assert reading.resolution_bytes == DATA_UNIT_BYTES


def test_sas_gigabytes_processed_to_the_megabyte() -> None:
    reading = _reading("scsi_seagate_st373453lc.json")
    assert reading.host_bytes_written == 13_782_768_000_000
    assert reading.resolution_bytes == 1_000_000
    assert "SCSI" in reading.source


@pytest.mark.parametrize("text", ["not json", "[1]"])
def test_output_that_is_not_smartctl_json_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="smartctl"):
        parse_smartctl(text)


#: smartctl 7.3's JSON when it cannot tell what a device is (exit status 1), as it prints it
UNKNOWN_TYPE = json.dumps({
    "json_format_version": [1, 0],
    "smartctl": {"version": [7, 3], "argv": ["smartctl", "-j", "-a", "/dev/sde"],
                 "messages": [{"string": "/dev/sde: Unable to detect device type",
                               "severity": "error"}],
                 "exit_status": 1},
})


def test_smartctl_failures_by_exit_status() -> None:
    text = UNKNOWN_TYPE
    assert smartctl_failure(text, 1) == "/dev/sde: Unable to detect device type"
    assert smartctl_failure(text, 0) is None
    assert "7.0 or newer" in (smartctl_failure("=======> UNRECOGNIZED OPTION: j\n", 1) or "")
    assert smartctl_failure("", 2) == "exit status 2"


# ---------------------------------------------------------------- read_health


class FakeRun:
    """Answers each tool's command with (exit status, output); a missing tool raises."""

    def __init__(self, answers: dict[str, tuple[int, str] | None]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(command)
        answer = self.answers.get(command[0])
        if answer is None:
            raise FileNotFoundError(2, "No such file or directory", command[0])
        code, out = answer
        return subprocess.CompletedProcess(command, code, out, "")


def test_sata_and_sas_devices_are_read_with_smartctl() -> None:
    run = FakeRun({"smartctl": (0, _text("ata_intel_s4510_host_writes_32mib.json"))})
    reading = read_health("/dev/sdb", {}, run=run)
    assert reading is not None and reading.host_bytes_written == 2575247 * 32 * MIB
    assert run.calls == [["smartctl", "-j", "-a", "-l", "devstat", "/dev/sdb"]]
    assert smartctl_command("/dev/sdb") == run.calls[0]


def test_smartctl_exit_bits_above_one_still_give_the_reading() -> None:
    run = FakeRun({"smartctl": (4, _text("ata_kingston_a400_lifetime_writes_gib.json"))})
    reading = read_health("/dev/sdc", {}, run=run)
    assert reading is not None and reading.host_bytes_written == 398 * GIB


def test_a_drive_without_a_count_gives_none() -> None:
    run = FakeRun({"smartctl": (0, _text("ata_hdd_wd_red_no_count.json"))})
    assert read_health("/dev/sdd", {}, run=run) is None


def test_missing_smartctl_is_a_one_line_error_naming_the_package() -> None:
    with pytest.raises(TargetError, match="smartmontools") as err:
        read_health("/dev/sdb", {}, run=FakeRun({}))
    assert "\n" not in err.value.message and err.value.message.startswith("/dev/sdb: ")


def test_smartctl_that_cannot_read_the_device_is_a_target_error() -> None:
    run = FakeRun({"smartctl": (1, UNKNOWN_TYPE)})
    with pytest.raises(TargetError, match="Unable to detect device type"):
        read_health("/dev/sde", {}, run=run)
    with pytest.raises(TargetError, match="printed no JSON"):
        read_health("/dev/sde", {}, run=FakeRun({"smartctl": (0, "garbage")}))


def test_nvme_falls_back_to_smartctl_where_nvme_cli_is_missing() -> None:
    run = FakeRun({"smartctl": (0, _text("nvme_samsung_970_evo_plus.json"))})
    reading = read_health("/dev/nvme0n1", {}, run=run)
    assert reading is not None and reading.host_bytes_written == 1969459 * DATA_UNIT_BYTES
    assert [c[0] for c in run.calls] == ["nvme", "smartctl"]
    with pytest.raises(TargetError, match=r"neither nvme-cli nor smartctl .*smartmontools"):
        read_health("/dev/nvme0n1", {}, run=FakeRun({}))


def test_nvme_cli_stays_first_for_nvme() -> None:
    smart_log = json.dumps({"data_units_written": 10})
    run = FakeRun({"nvme": (0, smart_log), "smartctl": (0, "{}")})
    reading = read_health("/dev/nvme1n1", {}, run=run)
    assert reading is not None and reading.source == "nvme smart-log"
    assert [c[0] for c in run.calls] == ["nvme"]


@pytest.mark.parametrize("path", ["/dev/vdb", "/dev/loop3", "/dev/zram0", "/dev/md0"])
def test_virtual_devices_are_not_asked(path: str) -> None:
    run = FakeRun({})
    assert read_health(path, {}, run=run) is None and run.calls == []
