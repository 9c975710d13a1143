"""``ssdlab specs`` and ``ssdlab import published``, black-box through the real command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ssdlab.errors import UserError
from ssdlab.store.db import Store
from ssdlab.store.records import TestState
from tests.support.cli import HINTED, one_line_error, sha256_of, ssdlab
from tests.support.records import doc

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "published-results.csv"
IMPORTED = re.compile(r"^imported (.+) \((\d+) rows?\) as run (\S+) \(read-only reference\)$")


def _import(store: Path, file: Path = FIXTURE) -> dict[str, str]:
    """Import ``file``; device -> run id."""
    result = ssdlab("import", "published", str(file), "--store", str(store))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    found = [IMPORTED.match(line) for line in result.stdout.splitlines()]
    assert all(found), result.stdout
    return {m.group(1): m.group(3) for m in found if m}


def test_specs_lists_the_vendor_table() -> None:
    result = ssdlab("specs")
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["vendor", "model", "GB", "read"]
    assert set(lines[1]) == {"-", " "}
    rows = lines[2:16]
    assert len(rows) == 14
    assert lines[16].startswith("MB/s = 10^6 bytes/s")
    assert ".txt" not in result.stdout  # no file of the project's that users lack
    micron = next(r for r in rows if "7450 PRO" in r and " 3,840 " in r)
    assert re.search(r"6,800 +5,300 +1,000,000 +180,000 +300,000 +80 +15 +1 ", micron)
    cd5 = next(r for r in rows if " CD5 " in r)
    assert re.search(r"550,000 +50,000 +- +- +- +<1 +\[3\]$", cd5)
    assert '  [3] Toshiba CD5 and CM5-R NVMe SSDs: "Тестирование SSD Toshiba CD5 и CM5-R", ' \
        "a review in Russian, 2019-07-11" in lines


def test_specs_filter_and_json() -> None:
    result = ssdlab("specs", "Micron", "9400", "MAX")
    assert result.returncode == 0 and result.stderr == ""
    assert len(result.stdout.splitlines()) == 2 + 3 + 1 + 2 + 1  # one source cited
    as_json = ssdlab("specs", "--json", "SN640")
    assert as_json.returncode == 0 and as_json.stderr == ""
    (row,) = json.loads(as_json.stdout)
    assert row["model"] == "Ultrastar DC SN640"
    assert (row["seq_read_mb_s"], row["rand_write_4k_iops"], row["dwpd"]) == (3250, 63000, "0.8")
    assert row["latency_read_us"] is None
    assert len(json.loads(ssdlab("specs", "--json").stdout)) == 14
    part = ssdlab("specs", "KCM51RUG7T68")
    assert part.returncode == 0 and "CM5-R" in part.stdout


def test_specs_without_a_match() -> None:
    result = ssdlab("specs", "Samsung", "PM9A3")
    assert result.returncode == 2
    assert one_line_error(result) == (
        f"Error: no vendor spec matches 'Samsung PM9A3' (see `{HINTED} specs`)"
    )
    assert result.stdout == ""


def test_import_runs_show_and_export(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    runs = _import(store)
    assert list(runs) == [
        "Toshiba CD5",
        "Toshiba CM5-R",
        "WD Ultrastar DC SN640",
        "Micron 7450 PRO x4 (NAS ZFS)",
        "Samsung 850 EVO 1TB (used; single drive)",
        "4x Samsung 850 EVO RAID0 256K stripe (any of 5 controllers)",
    ]

    listing = ssdlab("runs", "--store", str(store))
    assert listing.returncode == 0 and listing.stderr == ""
    cm5_line = next(line for line in listing.stdout.splitlines() if runs["Toshiba CM5-R"] in line)
    assert cm5_line.split()[3:6] == ["published", "reference", "reference"]
    assert cm5_line.endswith("Toshiba CM5-R [published:001_7e2a2261cc4b3893.txt]")

    show = ssdlab("show", runs["Toshiba CM5-R"], "--store", str(store))
    assert show.returncode == 0 and show.stderr == ""
    assert "READ-ONLY REFERENCE: figures published in 001_7e2a2261cc4b3893.txt" in show.stdout
    assert "== IOPS [published]" in show.stdout
    assert "as published: threads 16 x QD 8, active range 100 %" in show.stdout
    four_k = next(line for line in show.stdout.splitlines() if line.startswith("  4 KiB "))
    assert four_k.split()[2] == "752,167" and four_k.split()[-1] == "311,008"
    assert "None" not in show.stdout

    sn640 = ssdlab("show", runs["WD Ultrastar DC SN640"], "--store", str(store))
    assert "128 KiB sequential      2,819.8      1,815.0" in sn640.stdout
    assert "IOPS fresh out of box 215,000, saturated 63,000" in sn640.stdout
    assert "pts_latency_vs_iops: p99_9_write_latency_ms_max" in sn640.stdout
    assert "None" not in sn640.stdout

    out = tmp_path / "cm5.json"
    exported = ssdlab("export", runs["Toshiba CM5-R"], "-o", str(out), "--store", str(store))
    assert exported.returncode == 0 and exported.stderr == ""
    doc = json.loads(out.read_text())
    assert doc["run"]["read_only"] is True and doc["run"]["status"] == "reference"
    assert doc["target"]["model"] == "Toshiba CM5-R"
    (test,) = doc["tests"]
    assert (test["name"], test["status"], len(test["result"]["cells"])) == ("iops", "published", 49)
    csv_out = ssdlab("export", runs["Toshiba CM5-R"], "--format", "csv", "--store", str(store))
    assert csv_out.returncode == 0 and csv_out.stderr == ""
    assert (
        f"{runs['Toshiba CM5-R']},iops,result,,iops_bs4096_r100,4096,100,random,iops,752167.0"
        in (csv_out.stdout.splitlines())
    )


def test_reimport_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    runs = _import(store)
    before = sha256_of(store)
    again = ssdlab("import", "published", str(FIXTURE), "--store", str(store))
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout.splitlines()[1] == (
        f"Toshiba CM5-R (49 rows): already imported as run {runs['Toshiba CM5-R']}; "
        "not imported again"
    )
    assert len(again.stdout.splitlines()) == 6
    assert "already imported" in again.stdout.splitlines()[5]
    assert sha256_of(store) == before
    with Store.open(store) as opened:
        assert len(opened.list_runs()) == 6


def test_a_malformed_file_is_one_line_exit_2_and_leaves_the_store_unchanged(
    tmp_path: Path,
) -> None:
    lines = FIXTURE.read_text().splitlines()
    lines[6] = lines[6].replace(",pts_iops,4,95,", ",pts_iops,4,x,")
    bad = tmp_path / "published.csv"
    bad.write_text("\n".join(lines) + "\n")
    assert lines[6].split(",")[4:6] == ["4", "x"]

    fresh = tmp_path / "fresh.sqlite"
    result = ssdlab("import", "published", str(bad), "--store", str(fresh))
    assert result.returncode == 2
    assert one_line_error(result) == (
        "Error: published.csv line 7: read_pct 'x' is not a number 0-100"
    )
    assert result.stdout == ""
    assert not fresh.exists()

    store = tmp_path / "results.sqlite"
    (tmp_path / "one.csv").write_text("\n".join(lines[:2]) + "\n")
    _import(store, tmp_path / "one.csv")
    before = sha256_of(store)
    result = ssdlab("import", "published", str(bad), "--store", str(store))
    assert result.returncode == 2 and "line 7" in one_line_error(result)
    assert sha256_of(store) == before


def test_import_usage_errors(tmp_path: Path) -> None:
    missing = ssdlab("import", "published", str(tmp_path / "nope.csv"))
    assert missing.returncode == 2
    assert "cannot read" in one_line_error(missing) and "No such file" in missing.stderr
    no_kind = ssdlab("import")
    assert no_kind.returncode == 2
    one_line_error(no_kind)


def test_a_write_to_a_reference_run_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    run_id = _import(store)["Toshiba CD5"]
    before = sha256_of(store)
    with Store.open(store) as opened:
        with pytest.raises(UserError, match="is a read-only reference run"):
            opened.set_test(run_id, "iops", TestState("steady", doc()))
        with pytest.raises(UserError, match="is a read-only reference run"):
            opened.finish_run(run_id, "complete")
    assert sha256_of(store) == before
