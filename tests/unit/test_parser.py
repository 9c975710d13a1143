"""Tests of ssdlab.engine.parser against golden outputs recorded from real fio 3.33 runs.

Expected values are always read from the fixture's raw JSON here (independently of the
parser), never hard-coded: the fixtures can be re-recorded with tests/fixtures/fio/record.sh.
"""

from __future__ import annotations

import copy
import json
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ssdlab.engine.model import DirectionStats, FioOutput, JobResult
from ssdlab.engine.parser import (
    FioOutputError,
    bin_error_ns,
    merged_percentile_ns,
    parse_fio_output,
)
from ssdlab.errors import ExitCode, UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.json"))
JSON_PLUS = "c_randrw70_8k_qd1_jsonplus.json"
JSON_PLUS_2000 = "h_2000_ios_jsonplus.json"


def text_of(name: str) -> str:
    return (FIXTURES / name).read_text()


def raw_split(text: str) -> tuple[list[dict[str, Any]], str]:
    """Documents and stray text, found independently of the parser.

    fio pretty-prints a document's opening and closing braces alone on a line at column 0
    (inner objects are indented), so documents are the spans from a "{" line to the next
    "}" line.
    """
    spans = [m.span() for m in re.finditer(r"^\{\n.*?^\}$", text, re.M | re.S)]
    documents = [json.loads(text[a:b]) for a, b in spans]
    edges = [0, *(x for span in spans for x in span), len(text)]
    stray = "".join(text[edges[i] : edges[i + 1]] for i in range(0, len(edges), 2))
    return documents, stray


def raw_jobs(text: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(job entry, its document) for every job entry except client mode's aggregate."""
    return [
        (entry, document)
        for document in raw_split(text)[0]
        for entry in document.get("jobs", []) + document.get("client_stats", [])
        if entry["jobname"] != "All clients"
    ]


def check_direction(parsed: DirectionStats, raw: dict[str, Any]) -> None:
    assert parsed.io_bytes == raw["io_bytes"]
    assert parsed.bw_bytes_per_s == raw["bw_bytes"]
    assert parsed.iops == raw["iops"]
    assert parsed.total_ios == raw["total_ios"]
    assert parsed.runtime_ms == raw["runtime"]
    clat, lat = raw["clat_ns"], raw["lat_ns"]
    assert parsed.clat_mean_ns == clat["mean"]
    assert parsed.clat_min_ns == clat["min"]
    assert parsed.clat_max_ns == clat["max"]
    assert parsed.clat_stddev_ns == clat["stddev"]
    assert parsed.lat_mean_ns == lat["mean"]
    assert parsed.lat_max_ns == lat["max"]
    expected_pcts = {float(k): v for k, v in clat.get("percentile", {}).items()}
    assert parsed.clat_percentiles_ns == expected_pcts
    assert parsed.clat_bins_ns == {int(k): v for k, v in clat.get("bins", {}).items()}
    assert parsed.empty == (raw["total_ios"] == 0)


def check_job(parsed: JobResult, raw: dict[str, Any], document: dict[str, Any]) -> None:
    assert parsed.name == raw["jobname"]
    assert parsed.error == raw["error"]
    assert parsed.usr_cpu_pct == raw["usr_cpu"]
    assert parsed.sys_cpu_pct == raw["sys_cpu"]
    assert parsed.job_runtime_ms == raw["job_runtime"]
    assert parsed.options == {**document.get("global options", {}), **raw["job options"]}
    check_direction(parsed.read, raw["read"])
    check_direction(parsed.write, raw["write"])
    assert parsed.total_iops == raw["read"]["iops"] + raw["write"]["iops"]


def assert_one_line_error(text: str, *fragments: str) -> FioOutputError:
    with pytest.raises(FioOutputError) as info:
        parse_fio_output(text)
    message = info.value.message
    assert message and len(message.splitlines()) == 1, message
    for fragment in fragments:
        assert fragment in message
    return info.value


# --------------------------------------------------------------------------- every fixture


def test_fixtures_present() -> None:
    assert len(ALL_FIXTURES) >= 7
    for name in ALL_FIXTURES:
        assert (FIXTURES / name).stat().st_size < 200_000


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_documents_and_stray_text(name: str) -> None:
    text = text_of(name)
    documents, stray = raw_split(text)
    out = parse_fio_output(text)
    assert isinstance(out, FioOutput)
    assert list(out.documents) == documents
    assert out.stray_text == stray
    assert out.fio_version == documents[0]["fio version"] == "fio-3.33"


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_jobs_match_raw_json(name: str) -> None:
    text = text_of(name)
    out = parse_fio_output(text)
    expected = raw_jobs(text)
    assert len(out.jobs) == len(expected) >= 1
    for parsed, (raw, document) in zip(out.jobs, expected, strict=True):
        check_job(parsed, raw, document)


# --------------------------------------------------------------------------- per fixture


def test_plain_json_single_randread_job() -> None:
    text = text_of("a_randread_4k.json")
    raw = json.loads(text)["jobs"][0]
    out = parse_fio_output(text)
    job = out.job(raw["jobname"])
    assert job.read.iops == raw["read"]["iops"] > 0
    assert not job.read.empty and job.write.empty
    assert "percentile" not in raw["write"]["clat_ns"]
    assert job.write.clat_percentiles_ns == {}
    assert job.read.clat_percentiles_ns[99.9] == raw["read"]["clat_ns"]["percentile"]["99.900000"]
    assert job.read.clat_bins_ns == {}  # plain json has no histogram
    assert job.options["bs"] == raw["job options"]["bs"] == "4k"
    assert out.stray_text.strip() == ""


def test_three_reporting_groups() -> None:
    text = text_of("b_three_groups.json")
    document = json.loads(text)
    out = parse_fio_output(text)
    assert [j.name for j in out.jobs] == [j["jobname"] for j in document["jobs"]]
    assert [j["groupid"] for j in document["jobs"]] == [0, 1, 2]
    randwrite, mixed, seqread = out.jobs
    assert randwrite.read.empty and randwrite.write.iops == document["jobs"][0]["write"]["iops"]
    assert not mixed.read.empty and not mixed.write.empty
    assert mixed.total_bw_bytes_per_s == (
        document["jobs"][1]["read"]["bw_bytes"] + document["jobs"][1]["write"]["bw_bytes"]
    )
    assert seqread.write.empty and seqread.read.io_bytes == document["jobs"][2]["read"]["io_bytes"]
    # global options reach every job; job options override them
    for job in out.jobs:
        assert job.options["numjobs"] == document["global options"]["numjobs"]
    assert mixed.options["rwmixread"] == document["jobs"][1]["job options"]["rwmixread"]


def test_json_plus_bins() -> None:
    text = text_of(JSON_PLUS)
    raw = json.loads(text)["jobs"][0]
    job = parse_fio_output(text).jobs[0]
    for parsed, direction in ((job.read, raw["read"]), (job.write, raw["write"])):
        bins = direction["clat_ns"]["bins"]
        assert parsed.clat_bins_ns == {int(k): v for k, v in bins.items()}
        assert all(isinstance(k, int) for k in parsed.clat_bins_ns)
        assert sum(parsed.clat_bins_ns.values()) == direction["clat_ns"]["N"]
        assert direction["clat_ns"]["N"] == direction["total_ios"] > 0


@pytest.mark.parametrize(
    ("name", "direction"), [(JSON_PLUS, "read"), (JSON_PLUS, "write"), (JSON_PLUS_2000, "read")]
)
def test_merged_percentile_reproduces_fios_own_percentiles(name: str, direction: str) -> None:
    raw = json.loads(text_of(name))["jobs"][0][direction]["clat_ns"]
    bins = {int(k): v for k, v in raw["bins"].items()}
    for key, value in raw["percentile"].items():
        assert merged_percentile_ns([bins], float(key)) == value, key


def test_merged_percentile_of_read_and_write_matches_numpy() -> None:
    raw = json.loads(text_of(JSON_PLUS))["jobs"][0]
    histograms = [
        {int(k): v for k, v in raw[d]["clat_ns"]["bins"].items()} for d in ("read", "write")
    ]
    values = np.array([v for h in histograms for v in h], dtype=np.int64)
    counts = np.array([c for h in histograms for c in h.values()], dtype=np.int64)
    samples = np.repeat(values, counts)
    assert samples.size == raw["read"]["total_ios"] + raw["write"]["total_ios"]
    for pct in (0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0):
        expected = float(np.percentile(samples, pct, method="inverted_cdf"))
        assert merged_percentile_ns(histograms, pct) == expected, pct
    assert merged_percentile_ns(histograms, 100.0) == float(samples.max())
    assert merged_percentile_ns(histograms, 0.0) == float(samples.min())


def test_stray_text_from_real_fio_note() -> None:
    text = text_of("d_psync_note.json")
    first_line = text.split("\n", 1)[0]
    assert first_line.startswith("note: both iodepth >= 1 and synchronous I/O engine")
    out = parse_fio_output(text)
    assert out.stray_text.startswith(first_line + "\n")
    assert first_line not in json.dumps(out.documents[0])
    raw = raw_split(text)[0][0]["jobs"][0]
    check_job(out.jobs[0], raw, raw_split(text)[0][0])


def test_two_concatenated_documents() -> None:
    text = text_of("e_two_documents.json")
    documents, _ = raw_split(text)
    out = parse_fio_output(text)
    assert len(out.documents) == len(documents) == 2
    assert [j.name for j in out.jobs] == [d["jobs"][0]["jobname"] for d in documents]
    assert out.jobs[0].write.iops == documents[0]["jobs"][0]["write"]["iops"]
    assert out.jobs[1].read.iops == documents[1]["jobs"][0]["read"]["iops"]


def test_client_server_single() -> None:
    text = text_of("f_client_server.json")
    document = json.loads(text)
    assert "jobs" not in document
    out = parse_fio_output(text)
    (job,) = out.jobs
    raw = document["client_stats"][0]
    assert job.name == raw["jobname"]
    assert job.read.iops == raw["read"]["iops"]
    assert job.options["filename"] == document["global options"]["filename"]
    assert job.options["rw"] == raw["job options"]["rw"]


def test_client_server_two_servers_skips_aggregate() -> None:
    text = text_of("f_client_server_two.json")
    document = raw_split(text)[0][0]
    names = [entry["jobname"] for entry in document["client_stats"]]
    assert "All clients" in names
    out = parse_fio_output(text)
    assert len(out.jobs) == len(names) - 1
    assert all(job.name != "All clients" for job in out.jobs)
    ports = [e["port"] for e in document["client_stats"] if e["jobname"] != "All clients"]
    assert len(set(ports)) == 2
    assert "Starting 1 process" in out.stray_text
    assert out.stray_text == text[: text.index("{")] + text[text.rindex("}") + 1 :]


def test_failed_job_is_parsed_with_its_error() -> None:
    text = text_of("g_job_error.json")
    raw = json.loads(text)["jobs"][0]
    (job,) = parse_fio_output(text).jobs
    assert job.error == raw["error"] != 0
    assert job.read.empty and job.write.empty
    assert "fio: pid=" in (FIXTURES / "g_job_error.stderr").read_text()


# --------------------------------------------------------------------------- synthetic layouts


def test_stray_text_with_braces_around_and_between_documents() -> None:
    doc1, doc2 = (text_of("a_randread_4k.json"), text_of("d_psync_note.json"))
    doc2 = doc2[doc2.index("{") :]
    pieces = [
        "fio: io_u error on file {/dev/shm/x}: Input/output error: read offset=0\n{}\n",
        doc1,
        "fio: file hash not empty on exit\n{ not json\n",
        doc2,
        '{"unrelated": [1, 2]}\ntrailing }{ text',
    ]
    out = parse_fio_output("".join(pieces))
    assert len(out.documents) == 2
    assert out.documents[0] == json.loads(doc1)
    assert out.stray_text == pieces[0] + "\n" + pieces[2] + "\n" + pieces[4]
    assert [j.name for j in out.jobs] == [
        json.loads(doc1)["jobs"][0]["jobname"],
        json.loads(doc2)["jobs"][0]["jobname"],
    ]


def test_documents_without_whitespace_between_them() -> None:
    doc = json.dumps(json.loads(text_of("a_randread_4k.json")), separators=(",", ":"))
    out = parse_fio_output(doc + doc + doc)
    assert len(out.documents) == 3 and len(out.jobs) == 3 and out.stray_text == ""


def old_style_document() -> dict[str, Any]:
    """A fio 2.x shaped document: usec latencies, KiB in io_bytes, bw only in KiB/s."""

    def direction(io_kib: int, iops: float) -> dict[str, Any]:
        return {
            "io_bytes": io_kib,
            "bw": io_kib * 2,
            "iops": iops,
            "runtime": 500,
            "total_ios": int(iops / 2),
            "clat": {
                "min": 2,
                "max": 900,
                "mean": 12.5,
                "stddev": 3.25,
                "percentile": {"50.000000": 11, "99.900000": 400},
            },
            "lat": {"min": 3, "max": 901, "mean": 13.75, "stddev": 3.5},
        }

    return {
        "fio version": "fio-2.2.10",
        "jobs": [
            {
                "jobname": "old",
                "groupid": 0,
                "error": 0,
                "read": direction(4096, 2048.0),
                "write": direction(0, 0.0),
                "usr_cpu": 1.5,
                "sys_cpu": 2.5,
            }
        ],
    }


def test_old_fio_2_units_are_converted() -> None:
    document = old_style_document()
    job = parse_fio_output(json.dumps(document)).jobs[0]
    raw = document["jobs"][0]["read"]
    assert job.read.io_bytes == raw["io_bytes"] * 1024
    assert job.read.bw_bytes_per_s == raw["bw"] * 1024
    assert job.read.clat_mean_ns == raw["clat"]["mean"] * 1000
    assert job.read.clat_min_ns == raw["clat"]["min"] * 1000
    assert job.read.clat_max_ns == raw["clat"]["max"] * 1000
    assert job.read.clat_stddev_ns == raw["clat"]["stddev"] * 1000
    assert job.read.lat_mean_ns == raw["lat"]["mean"] * 1000
    assert job.read.lat_max_ns == raw["lat"]["max"] * 1000
    assert job.read.clat_percentiles_ns == {50.0: 11_000.0, 99.9: 400_000.0}
    assert job.job_runtime_ms == raw["runtime"]  # no job_runtime in fio 2.x
    assert job.options == {}


def test_bw_fallback_when_only_bw_bytes_is_missing() -> None:
    document = json.loads(text_of("a_randread_4k.json"))
    read = document["jobs"][0]["read"]
    del read["bw_bytes"]
    job = parse_fio_output(json.dumps(document)).jobs[0]
    assert job.read.bw_bytes_per_s == read["bw"] * 1024
    assert job.read.io_bytes == read["io_bytes"]  # io_kbytes present: io_bytes is bytes


# --------------------------------------------------------------------------- errors


def test_error_type_and_exit_code() -> None:
    assert issubclass(FioOutputError, UserError)
    assert FioOutputError("x").exit_code == ExitCode.FAILURE


@pytest.mark.parametrize("text", ["", "\n", "   \n\t\n"])
def test_empty_stdout(text: str) -> None:
    assert_one_line_error(text, "no JSON output", "empty")


def test_only_an_error_line() -> None:
    line = "fio: failed parsing rw=bogus"
    assert_one_line_error(line + "\n", "no JSON output", line)


def test_real_valid_values_listing_without_json() -> None:
    text = "        valid values: read       Sequential read\n" * 20
    error = assert_one_line_error(text, "no JSON output", "valid values: read")
    quoted = error.message.split("began: ", 1)[1]
    assert len(quoted) < 220 and quoted.endswith("...'")


def test_stray_braces_only() -> None:
    assert_one_line_error("fio: {oops} { [1, 2] }\n{}", "no JSON output", "{oops}")


@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.5, 0.9, 0.999])
def test_truncated_document(fraction: float) -> None:
    text = text_of("b_three_groups.json")
    assert_one_line_error(text[: int(len(text) * fraction)])


def test_truncated_second_document() -> None:
    text = text_of("a_randread_4k.json")
    assert_one_line_error(text + text[: len(text) // 2], "truncated or malformed")


def test_garbage_inside_document() -> None:
    text = text_of("a_randread_4k.json").replace('"iops" :', '"iops" :: ', 1)
    assert_one_line_error(text, "truncated or malformed", "line")


def mutated(change: Any, name: str = "a_randread_4k.json") -> str:
    document = copy.deepcopy(json.loads(text_of(name)))
    change(document)
    return json.dumps(document)


def _set(path: list[Any], value: Any) -> Any:
    def change(document: Any) -> None:
        for key in path[:-1]:
            document = document[key]
        document[path[-1]] = value

    return change


def _delete(path: list[Any]) -> Any:
    def change(document: Any) -> None:
        for key in path[:-1]:
            document = document[key]
        del document[path[-1]]

    return change


WRONG = [
    (_set(["jobs"], "x"), "jobs"),
    (_set(["jobs", 0], 3), "jobs[0]"),
    (_set(["fio version"], 3.33), "fio version"),
    (_set(["jobs", 0, "jobname"], None), "jobname"),
    (_set(["jobs", 0, "error"], "0"), "error"),
    (_set(["jobs", 0, "error"], True), "error"),
    (_set(["jobs", 0, "read"], []), "read"),
    (_set(["jobs", 0, "read", "iops"], "fast"), "iops"),
    (_set(["jobs", 0, "read", "iops"], float("nan")), "iops"),
    (_set(["jobs", 0, "read", "iops"], 10**400), "iops"),
    (_set(["jobs", 0, "read", "io_bytes"], 1.5), "io_bytes"),
    (_set(["jobs", 0, "read", "total_ios"], [1]), "total_ios"),
    (_set(["jobs", 0, "read", "bw_bytes"], None), "bw_bytes"),
    (_set(["jobs", 0, "write", "clat_ns"], 0), "clat_ns"),
    (_set(["jobs", 0, "read", "clat_ns", "mean"], "1.0"), "mean"),
    (_set(["jobs", 0, "read", "clat_ns", "percentile"], [1, 2]), "percentile"),
    (_set(["jobs", 0, "read", "clat_ns", "percentile", "nine"], 1), "nine"),
    (_set(["jobs", 0, "read", "clat_ns", "percentile", "101.0"], 1), "101.0"),
    (_set(["jobs", 0, "read", "clat_ns", "percentile", "99.000000"], "x"), "99.000000"),
    (_set(["jobs", 0, "read", "clat_ns", "bins"], {"12x": 1}), "12x"),
    (_set(["jobs", 0, "read", "clat_ns", "bins"], {"1200": -1}), "1200"),
    (_set(["jobs", 0, "read", "clat_ns", "bins"], {"1200": 0.5}), "1200"),
    (_set(["jobs", 0, "read", "lat_ns", "max"], {}), "max"),
    (_set(["jobs", 0, "job options", "bs"], 4096), "bs"),
    (_set(["jobs", 0, "job options"], "bs=4k"), "job options"),
    (_set(["jobs", 0, "usr_cpu"], "1%"), "usr_cpu"),
    (_set(["jobs", 0, "job_runtime"], None), "job_runtime"),
    (_delete(["jobs", 0, "read"]), "read"),
    (_delete(["jobs", 0, "write", "iops"]), "iops"),
    (_delete(["jobs", 0, "read", "lat_ns"]), "lat_ns"),
    (_delete(["jobs"]), "jobs"),
]


@pytest.mark.parametrize(("change", "key"), WRONG)
def test_wrong_types_name_the_key(change: Any, key: str) -> None:
    assert_one_line_error(mutated(change), key)


def test_unified_rw_reporting_mixed_is_refused_clearly() -> None:
    def to_mixed(document: Any) -> None:
        job = document["jobs"][0]
        job["mixed"] = job.pop("read")
        del job["write"], job["trim"]

    assert_one_line_error(mutated(to_mixed), "unified_rw_reporting", "jobs[0]")


def test_wrong_type_in_second_document_names_the_document() -> None:
    good = text_of("a_randread_4k.json")
    bad = mutated(_set(["jobs", 0, "write", "iops"], "x"))
    assert_one_line_error(good + bad, "document 2 of 2", "jobs[0].write.iops")


def test_wrong_type_in_client_stats() -> None:
    bad = mutated(_set(["client_stats", 0, "read", "runtime"], "1s"), "f_client_server.json")
    assert_one_line_error(bad, "client_stats[0].read.runtime")


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    assert_one_line_error("{" * 100_000, "no JSON output")
    assert_one_line_error('{"a":' * 50_000 + "1" + "}" * 50_000, "nested too deeply")
    assert_one_line_error('{"a":' * 5_000 + '"x"', "nested too deeply")


# --------------------------------------------------------------------------- merged_percentile_ns


def exact_percentile(histograms: list[dict[int, int]], pct: float) -> float | None:
    samples = sorted(v for h in histograms for v, c in h.items() for _ in range(c))
    if not samples:
        return None
    rank = max(1, math.ceil(Fraction(pct) / 100 * len(samples)))
    return float(samples[rank - 1])


def test_merged_percentile_no_samples() -> None:
    assert merged_percentile_ns([], 50.0) is None
    assert merged_percentile_ns([{}, {}], 99.0) is None
    assert merged_percentile_ns([{1000: 0}], 50.0) is None


@pytest.mark.parametrize("pct", [-0.1, 100.01, float("nan"), float("inf")])
def test_merged_percentile_rejects_bad_pct(pct: float) -> None:
    with pytest.raises(ValueError, match="percentile"):
        merged_percentile_ns([{1: 1}], pct)


def test_merged_percentile_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="negative"):
        merged_percentile_ns([{1: 1}, {2: -1}], 50.0)


def test_merged_percentile_merges_equal_buckets() -> None:
    histograms = [{100: 2, 300: 1}, {100: 1, 200: 6}]
    for pct in (0.0, 10.0, 30.0, 1 / 3 * 100, 33.4, 50.0, 90.0, 90.01, 100.0):
        assert merged_percentile_ns(histograms, pct) == exact_percentile(histograms, pct)
    assert merged_percentile_ns(histograms, 30.0) == 100.0
    assert merged_percentile_ns(histograms, 40.0) == 200.0
    assert merged_percentile_ns(histograms, 100.0) == 300.0


def test_merged_percentile_edge_is_exact_like_fio() -> None:
    # 99.95 % of 2000 samples: fio computes 99.95/100*2000 in long double, a hair above
    # 1999, so the 2000th sample is the answer; in doubles it is exactly 1999.0
    assert math.ceil(99.95 / 100 * 2000) == 1999
    histogram = {10: 1999, 20: 1}
    assert merged_percentile_ns([histogram], 99.95) == exact_percentile([histogram], 99.95) == 20
    # ... and the real fio run with 2000 I/Os agrees
    raw = json.loads(text_of(JSON_PLUS_2000))["jobs"][0]["read"]["clat_ns"]
    assert raw["N"] == 2000
    samples = sorted(int(k) for k, c in raw["bins"].items() for _ in range(c))
    assert raw["percentile"]["99.950000"] == samples[1999]


# -- the histogram's error bound ------------------------------------------------------------


def _fio_bucket_value(ns: int) -> int:
    """The value fio 3.33 reports for the bucket a latency of ``ns`` falls in (stat.c
    plat_val_to_idx, then plat_idx_to_val), written out here to judge bin_error_ns."""
    bits, buckets = 6, 64
    msb = ns.bit_length() - 1 if ns else 0
    if msb <= bits:
        idx = ns
    else:
        error_bits = msb - bits
        idx = ((error_bits + 1) << bits) + ((buckets - 1) & (ns >> error_bits))
    if idx < buckets << 1:
        return idx
    error_bits = (idx >> bits) - 1
    base = 1 << (error_bits + bits)
    return int(base + ((idx % buckets) + 0.5) * (1 << error_bits))


def test_bin_error_bounds_every_latency_in_the_bucket_and_is_reached() -> None:
    reached: set[int] = set()
    samples = [*range(0, 5000), *range(5000, 2_000_000, 997), *(2 ** k + d for k in range(7, 34)
                                                               for d in (-1, 0, 1))]
    for ns in samples:
        value = _fio_bucket_value(ns)
        bound = bin_error_ns(value)
        assert abs(value - ns) <= bound, (ns, value, bound)
        assert bound <= value / 128
        if bound and abs(value - ns) == bound:
            reached.add(value.bit_length())
    # the bound is tight: in every power of two sampled densely, some latency reaches it
    assert set(range(8, 13)) <= reached
