"""The Prometheus endpoint's text: strictly well-formed, read by prometheus_client's parser,
and carrying the values of the running runs' last stored rounds; the example Grafana
dashboard asks only for metrics the endpoint writes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis.steady import SNIA_RULE, check_window
from ssdlab.serve import metrics
from ssdlab.store.db import Store
from tests.support import servestore as ss

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "docs" / "grafana-ssdlab.json"
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)")


def strict_check(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """What prometheus_client's parser lets pass but Prometheus's own format forbids:
    TYPE after samples, a family's samples split, a series twice, no final newline, bad
    names or escapes. The samples, by (name, labels)."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    typed: dict[str, str] = {}
    helped: set[str] = set()
    finished: set[str] = set()
    current: str | None = None
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name, rest = line[2:6], *line[7:].split(" ", 1)
            assert NAME.fullmatch(name), line
            assert name not in finished and name != current, \
                f"{line}: after the family's samples"
            if kind == "HELP":
                assert name not in helped, f"HELP twice: {line}"
                helped.add(name)
            else:
                assert name not in typed, f"TYPE twice: {line}"
                assert rest in ("gauge", "counter", "untyped", "summary", "histogram"), line
                typed[name] = rest
            if current is not None and current != name:
                finished.add(current)
            current = None
            continue
        assert not line.startswith("#") and line, f"unexpected line {line!r}"
        match = SAMPLE.fullmatch(line)
        assert match, f"not a sample: {line!r}"
        name, _, body, value = match.groups()
        assert name in typed, f"sample before its TYPE: {line}"
        assert name not in finished, f"{name}'s samples are not in one group"
        if current is not None and current != name:
            finished.add(current)
        current = name
        labels: list[tuple[str, str]] = []
        if body:
            rest = body
            while rest:
                found = LABEL.match(rest)
                assert found, f"bad label in {line!r}"
                labels.append((found.group(1), found.group(2)))
                rest = rest[found.end():]
                assert rest == "" or rest.startswith(","), line
                rest = rest[1:]
        assert len({k for k, _ in labels}) == len(labels), f"a label twice: {line}"
        key = (name, tuple(sorted(labels)))
        assert key not in series, f"series twice: {line}"
        series[key] = float(value)
    return series


def test_the_strict_checker_catches_what_the_parser_lets_pass() -> None:
    good = "# HELP a x\n# TYPE a gauge\na 1\n"
    strict_check(good)
    for bad in ("# HELP a x\n# TYPE a gauge\na 1",  # no final newline
                "a 1\n# TYPE a gauge\n",  # TYPE after a sample
                "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",  # a series twice
                "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na{x=\"2\"} 1\n",  # split group
                '# TYPE a gauge\na{x="\\q"} 1\n'):  # a bad escape
        with pytest.raises(AssertionError):
            strict_check(bad)


def _store(tmp_path: Path, rounds: int, target: str = "/dev/nvme9n1") -> tuple[Path, str,
                                                                                dict[str, Any]]:
    path = tmp_path / "results.sqlite"
    with Store.open(path) as store:
        finished = ss.new_running_run(store, target="/dev/old")
        ss.add_round(store, finished, 1)
        store.finish_run(finished, "complete")
        run_id = ss.new_running_run(store, target=target)
        last: dict[str, Any] = {}
        for n in range(1, rounds + 1):
            last = ss.add_round(store, run_id, n)
    return path, run_id, last


def _collect(path: Path) -> str:
    with Store.open(path) as store:
        return metrics.collect(store)


def test_metrics_carry_the_last_stored_round(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    path, run_id, last = _store(tmp_path, 7)
    text = _collect(path)
    strict_check(text)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    base = {"run": run_id, "test": ss.TEST}
    assert value("ssdlab_runs_running") == 1
    assert value("ssdlab_round_number", **base) == 7
    for cell in last["cells"]:
        labels = {**base, "cell": cell["cell"], "block_bytes": "4096",
                  "read_pct": str(cell["read_pct"]), "pattern": "random", "threads": "2",
                  "iodepth": "32"}
        assert value("ssdlab_iops", **labels) == cell["iops"]
        assert value("ssdlab_throughput_bytes_per_second", **labels) == cell["bw_bytes_per_s"]
        assert value("ssdlab_latency_mean_seconds", **labels) == pytest.approx(
            cell["lat_mean_us"] / 1e6, rel=1e-12)
        assert value("ssdlab_latency_seconds", **labels, quantile="0.99") == pytest.approx(
            cell["lat_p99_us"] / 1e6, rel=1e-12)
        assert value("ssdlab_latency_seconds", **labels, quantile="0.9999") == pytest.approx(
            cell["lat_p99_99_us"] / 1e6, rel=1e-12)
    assert value("ssdlab_tracking_value", **base, variable=ss.VARIABLE) == \
        last["tracking"][ss.VARIABLE]
    window = [ss.round_iops(n) for n in range(3, 8)]
    check = check_window(ss.VARIABLE, window, 3, SNIA_RULE)
    assert value("ssdlab_steady_state_excursion_ratio", **base, variable=ss.VARIABLE,
                 kind="data") == pytest.approx(check.data_excursion_pct / 100, rel=1e-12)
    assert value("ssdlab_steady_state_excursion_ratio", **base, variable=ss.VARIABLE,
                 kind="slope") == pytest.approx(check.slope_excursion_pct / 100, rel=1e-12)
    assert value("ssdlab_steady_state_limit_ratio", **base, kind="data") == 0.2
    assert not any(dict(k[1]).get("run") not in (None, run_id) for k in samples), \
        "only the running run is described"


def test_before_the_window_is_full_there_is_no_excursion(tmp_path: Path) -> None:
    path, _, _ = _store(tmp_path, 3)
    text = _collect(path)
    strict_check(text)
    assert "\nssdlab_steady_state_excursion_ratio{" not in text
    assert "\nssdlab_round_number{" in text


def test_label_values_are_escaped(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    odd = 'C:\\disk "one"\nline two'
    path, _, _ = _store(tmp_path, 1, target=odd)
    text = _collect(path)
    series = strict_check(text)
    assert any(dict(k[1]).get("target") == 'C:\\\\disk \\"one\\"\\nline two' for k in series)
    info = next(f for f in text_string_to_metric_families(text) if f.name == "ssdlab_run_info")
    assert [s.labels["target"] for s in info.samples] == [odd]


def test_no_running_run_is_still_a_valid_exposition(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    Store.open(path).close()
    text = _collect(path)
    assert strict_check(text) == {("ssdlab_runs_running", ()): 0.0}


def test_the_grafana_dashboard_asks_for_metrics_the_endpoint_writes() -> None:
    doc = json.loads(GRAFANA.read_text())
    assert doc["title"] and doc["uid"] and doc["schemaVersion"] >= 30
    assert [i["name"] for i in doc["__inputs"]] == ["DS_PROMETHEUS"]
    written = set(metrics.families())
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert "label_values(ssdlab_round_number, run)" in json.dumps(variables["run"]["query"])
    exprs = []
    ids = set()
    for panel in doc["panels"]:
        assert {"id", "type", "gridPos", "title"} <= set(panel), panel.get("title")
        assert panel["id"] not in ids
        ids.add(panel["id"])
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        for target in panel["targets"]:
            assert target["refId"] and target["expr"]
            exprs.append(target["expr"])
    assert exprs
    for expr in exprs:
        named = set(re.findall(r"\bssdlab_[a-z0-9_]+", expr))
        assert named and named <= written, f"{expr}: {named - written} not written"
