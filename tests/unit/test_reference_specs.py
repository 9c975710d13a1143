"""The vendor table shipped with ssdlab, matching device models to it, and user queries."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from ssdlab.errors import UserError
from ssdlab.reference.specs import (
    MATCH_RULES,
    VendorSpec,
    find_spec,
    find_specs,
    load_specs,
    match_spec,
    match_spec_explained,
    parse_specs,
)

TB = 10**12


def test_the_table_is_package_data_readable_through_importlib_resources() -> None:
    data = resources.files("ssdlab.reference").joinpath("data/vendor-specs.csv")
    text = data.read_text(encoding="utf-8")
    assert text.startswith("vendor,model,series,")
    assert len(text.splitlines()) == 15  # header + 14 rows


def test_load_specs_types_units_and_empty_cells() -> None:
    specs = load_specs()
    assert len(specs) == 14
    assert all(isinstance(s, VendorSpec) for s in specs)
    micron = find_spec("7450 PRO 3840", specs)
    assert (micron.vendor, micron.model, micron.capacity_gb) == ("Micron", "7450 PRO", 3840)
    assert (micron.seq_read_mb_s, micron.seq_write_mb_s) == (6800, 5300)
    assert (micron.rand_read_4k_iops, micron.rand_write_4k_iops) == (1_000_000, 180_000)
    assert micron.mixed_70_30_iops == 300_000
    assert (micron.latency_read_us, micron.latency_write_us) == (80.0, 15.0)
    assert (micron.endurance_tbw, micron.warranty_years, micron.dwpd) == (7300, 5, "1")
    assert micron.source == "000_3b129542136394e8.txt"
    cd5 = find_spec("CD5", specs)
    assert cd5.dwpd == "<1"  # text: the source says "<1"
    assert cd5.mixed_70_30_iops is None and cd5.latency_read_us is None
    assert cd5.endurance_tbw is None
    sn640 = find_spec("SN640", specs)
    assert (sn640.seq_read_mb_s, sn640.seq_write_mb_s) == (3250, 1887)  # MiB/s converted
    assert sn640.dwpd == "0.8"


def test_load_specs_from_a_file(tmp_path: Path) -> None:
    text = resources.files("ssdlab.reference").joinpath("data/vendor-specs.csv").read_text()
    path = tmp_path / "mine.csv"
    path.write_text(text.splitlines()[0] + "\n" + text.splitlines()[1] + "\n")
    assert [s.label for s in load_specs(path)] == ["Micron 7450 PRO 960 GB"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n", "x.csv line 1: the header must be vendor,model,"),
        (
            "HEADER\nMicron,7450 PRO,PRO,U.3,NVMe,lots,1,,,,,,,,,,doc\n",
            "x.csv line 2: capacity_gb 'lots' is not a whole number",
        ),
        (
            "HEADER\nMicron,7450 PRO,PRO,U.3,NVMe,960,1,,,,,,fast,,,,doc\n",
            "x.csv line 2: latency_read_us 'fast' is not a number",
        ),
        ("HEADER\nMicron,,PRO,U.3,NVMe,960,1,,,,,,,,,,doc\n", "x.csv line 2: model is empty"),
        ("HEADER\nMicron,7450 PRO\n", "x.csv line 2: 2 fields, expected 17"),
    ],
)
def test_parse_specs_errors_name_the_line_and_value(text: str, message: str) -> None:
    header = resources.files("ssdlab.reference").joinpath("data/vendor-specs.csv")
    text = text.replace("HEADER", header.read_text().splitlines()[0])
    with pytest.raises(UserError) as caught:
        parse_specs(text, "x.csv")
    assert caught.value.message.startswith(message)
    assert "\n" not in caught.value.message


@pytest.mark.parametrize(
    ("model", "capacity_bytes", "expected"),
    [
        # part numbers as Linux / nvme-cli report them: the capacity code decides
        ("MTFDKCC3T8TFR-1BC1ZABYY", None, "Micron 7450 PRO 3840 GB"),
        ("Micron_7450_MTFDKCC15T3TFR", None, "Micron 7450 PRO 15360 GB"),
        ("MTFDKCC960TFR-1BC1ZABYY", None, "Micron 7450 PRO 960 GB"),
        ("MTFDKCC1T9TFR-1BC1ZABYYR", 1_000_000_000, "Micron 7450 PRO 1920 GB"),
        ("MTFDKCC30T7TGH-1BC1ZABYY", None, "Micron 9400 PRO 30720 GB"),
        ("Micron_9400_MTFDKCC12T8TGJ", None, "Micron 9400 MAX 12800 GB"),
        ("KCM5XRUG7T68", None, "Toshiba CM5-R 7680 GB"),
        ("KCM51RUG7T68", None, "Toshiba CM5-R 7680 GB"),
        ("TOSHIBA KCD5XLUG7T68", None, "Toshiba CD5 7680 GB"),
        ("KCD51LUG7T68", None, "Toshiba CD5 7680 GB"),
        ("WUS4BB038D7P3E3", None, "Western Digital Ultrastar DC SN640 3840 GB"),
        ("WDC  WUS4BB038D7P3E1", None, "Western Digital Ultrastar DC SN640 3840 GB"),
        # plain names: the device's capacity decides (decimal GB, closest)
        ("Micron 7450 PRO", 3_840_755_982_336, "Micron 7450 PRO 3840 GB"),
        ("Micron 7450 PRO", 1_920_383_410_176, "Micron 7450 PRO 1920 GB"),
        ("Micron 7450 PRO", 3_200_000_000_000, "Micron 7450 PRO 3840 GB"),  # smaller namespace
        ("micron 7450pro", 20 * TB, "Micron 7450 PRO 15360 GB"),
        ("Micron 9400 MAX", 12_800 * 10**9, "Micron 9400 MAX 12800 GB"),
        ("WDC SN640", None, "Western Digital Ultrastar DC SN640 3840 GB"),
        ("Ultrastar DC SN640", 3_840 * 10**9, "Western Digital Ultrastar DC SN640 3840 GB"),
        ("CM5-R", None, "Toshiba CM5-R 7680 GB"),
        ("KIOXIA CD5", None, "Toshiba CD5 7680 GB"),
    ],
)
def test_match_spec(model: str, capacity_bytes: int | None, expected: str) -> None:
    found = match_spec(model, capacity_bytes, load_specs())
    assert found is not None and found.label == expected


@pytest.mark.parametrize(
    ("model", "capacity_bytes"),
    [
        (None, 3840 * 10**9),
        ("", None),
        ("QEMU NVMe Ctrl", 1 << 30),
        ("Loop Device", None),
        ("MTFDKCC3T8TGP-1BK1DABYY", None),  # Micron 7500 PRO (family GP): not in the table
        ("MTFDKCC3T2TFS-1BC1ZABYYR", None),  # Micron 7450 MAX (FS): not in the table
        ("MTFDKBA960TFR-1BC1ZABYY", None),  # 7450 PRO M.2 (BA): other claims than U.3
        ("KCM5XVUG3T20", None),  # CM5-V (mixed use): not in the table
        ("WUS4CB016D7P3E3", None),  # SN640 2 DWPD line: not in the table
        ("Micron 7450 PRO", None),  # five capacities and nothing to choose by
        ("Micron 7450 MAX", 3200 * 10**9),
    ],
)
def test_match_spec_finds_nothing(model: str | None, capacity_bytes: int | None) -> None:
    assert match_spec(model, capacity_bytes, load_specs()) is None


def test_match_spec_explained_says_how() -> None:
    found = match_spec_explained("Micron_7450_MTFDKCC3T8TFR", 3_840_755_982_336)
    assert found is not None
    assert found.spec.label == "Micron 7450 PRO 3840 GB"
    assert found.reason == "part number MTFDKCC3T8TFR: capacity code 3T8"
    by_name = match_spec_explained("Micron 7450 PRO", 1_920_383_410_176)
    assert by_name is not None and "device capacity 1,920 GB" in by_name.reason


def test_every_rule_matches_its_example_and_names_a_row_of_the_table() -> None:
    specs = load_specs()
    models = {(s.vendor, s.model) for s in specs}
    for rule in MATCH_RULES:
        assert (rule.vendor, rule.model) in models, rule
        assert rule.example, rule
        text = " ".join(rule.example.upper().replace("_", " ").split())
        assert re.search(rule.pattern, text), rule
        assert ("(?P<cap>" in rule.pattern) == bool(rule.capacity_code), rule
        found = match_spec(rule.example, 10**12, specs)
        assert found is not None and found.model == rule.model, rule


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("7450 PRO 3840", "Micron 7450 PRO 3840 GB"),
        ("Micron 9400 MAX 12800", "Micron 9400 MAX 12800 GB"),
        ("micron 9400 max 12.8TB", "Micron 9400 MAX 12800 GB"),
        ("9400 PRO 15.36tb", "Micron 9400 PRO 15360 GB"),
        ("SN640", "Western Digital Ultrastar DC SN640 3840 GB"),
        ("WD SN640", "Western Digital Ultrastar DC SN640 3840 GB"),
        ("Ultrastar DC SN640", "Western Digital Ultrastar DC SN640 3840 GB"),
        ("CM5-R", "Toshiba CM5-R 7680 GB"),
        ("Kioxia CD5", "Toshiba CD5 7680 GB"),
        ("CM5R", "Toshiba CM5-R 7680 GB"),  # through the model rules
        ("KCM51RUG7T68", "Toshiba CM5-R 7680 GB"),
        ("MTFDKCC7T6TFR-1BC1ZABYY", "Micron 7450 PRO 7680 GB"),
    ],
)
def test_find_spec(query: str, expected: str) -> None:
    assert find_spec(query, load_specs()).label == expected


def test_find_spec_ambiguous_lists_the_candidates_in_one_line() -> None:
    with pytest.raises(UserError) as caught:
        find_spec("Micron 9400 PRO")
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith("'Micron 9400 PRO' matches 3 vendor specs (")
    for capacity in (7680, 15360, 30720):
        assert f"Micron 9400 PRO {capacity} GB" in message
    assert "e.g. '9400 PRO 7680'" in message


@pytest.mark.parametrize("query", ["Samsung PM9A3", "7450 PRO 4000", "MTFDKCC3T8TGP"])
def test_find_spec_no_match(query: str) -> None:
    with pytest.raises(UserError) as caught:
        find_spec(query)
    assert caught.value.message == f"no vendor spec matches {query!r} (see `ssdlab specs`)"


def test_find_specs_filters_and_an_empty_query_is_everything() -> None:
    specs = load_specs()
    assert find_specs("", specs) == list(specs)
    assert [s.capacity_gb for s in find_specs("7450", specs)] == [960, 1920, 3840, 7680, 15360]
    assert {s.model for s in find_specs("3840", specs)} == {"7450 PRO", "Ultrastar DC SN640"}
    assert {s.model for s in find_specs("pro 7680", specs)} == {"7450 PRO", "9400 PRO"}


# -- where the figures come from, cited as a user can find it ------------------------


def _ids(resource: str) -> set[str]:
    import csv
    import io
    text = resources.files("ssdlab.reference").joinpath(resource).read_text(encoding="utf-8")
    return {row["source"] for row in csv.DictReader(io.StringIO(text))}


def test_every_document_the_packaged_figures_come_from_is_cited() -> None:
    from ssdlab.reference.sources import load_sources
    sources = load_sources()
    named = _ids("data/vendor-specs.csv") | _ids("data/published-db.csv")
    assert named and named <= set(sources)
    for source in sources.values():
        citation = source.cite()
        assert source.language and source.about and citation.startswith(source.about)
        assert f"a review in {source.language}" in citation
        assert ".txt" not in citation and source.id not in citation


def test_a_source_the_package_does_not_know_is_cited_as_given() -> None:
    from ssdlab.reference.sources import cite
    assert cite("my-review.pdf") == "my-review.pdf"
    assert cite("001_7e2a2261cc4b3893.txt") == (
        'Toshiba CD5 and CM5-R NVMe SSDs: "Тестирование SSD Toshiba CD5 и CM5-R", '
        "a review in Russian, 2019-07-11")


def test_specs_cites_the_reviews_and_the_shipped_file_never_a_file_users_lack() -> None:
    from tests.support.cli import ssdlab_in_process
    result = ssdlab_in_process("specs")
    assert result.returncode == 0 and result.stderr == ""
    assert ".txt" not in result.stdout
    lines = result.stdout.splitlines()
    rows = lines[2:16]
    assert [r.rsplit(None, 1)[-1] for r in rows] == ["[1]"] * 5 + ["[2]"] * 6 + ["[3]"] * 2 + [
        "[4]"]  # in the order the rows first name them
    notes = lines[lines.index("sources (the vendors' figures as these reviews quote them):"):]
    assert notes[1].startswith("  [1] Micron 7450 PRO U.3 drives")
    assert notes[3].startswith("  [3] Toshiba CD5 and CM5-R NVMe SSDs: ")
    assert len([n for n in notes if n.startswith("  [")]) == 4
    shipped = notes[-1].removeprefix("the figures ship with ssdlab: ").split(" (")[0]
    assert Path(shipped).read_text(encoding="utf-8").startswith("vendor,model,")


def test_specs_json_cites_each_row() -> None:
    import json

    from tests.support.cli import ssdlab_in_process
    (row,) = json.loads(ssdlab_in_process("specs", "--json", "SN640").stdout)
    assert row["source"] == "004_a5748b6666db09c4.txt"  # the data's own key, as before
    assert row["cited"] == ('WD Ultrastar DC SN640 NVMe SSD: "NVMe SSD Western Digital '
                            'Ultrastar DC SN640", a review in Russian, 2020-07-01')
