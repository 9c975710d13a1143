"""Plain text every suite's ``ssdlab show`` lines and end-of-run lines share: tables laid
out like the reviews, numbers, a test's parameters, verdict and state in a line, and the
lines ``ssdlab run`` prints when a run ends. Reads stored runs only; no registry lookup
(the dispatcher is ``terminal.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ssdlab.analysis.predict import LABEL as PREDICTED_LABEL
from ssdlab.errors import command
from ssdlab.store.records import RunData, TestData


def text_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    body = [list(header), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in body) for i in range(len(header))]
    lines = []
    for n, row in enumerate(body):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  " + "  ".join(cells))
        if n == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return lines


#: what ends a text cut to fit its column
CUT = "..."


def clip(text: str, width: int, sep: str = "") -> str:
    """``text`` in at most ``width`` characters; cut, it ends with "...", after the last
    whole item (``sep``-separated) that fits where there is one."""
    if len(text) <= width:
        return text
    room = width - len(CUT)
    if sep:
        kept = ""
        for item in text.split(sep):
            longer = f"{kept}{item}{sep}"
            if len(longer) > room:
                break
            kept = longer
        if kept:
            return kept + CUT
    return text[:room] + CUT


def num(value: Any, digits: int = 0) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:,.{digits}f}"


def found_messages(test: TestData) -> tuple[str, str, str]:
    """What a test found, in its stored documents' words, the most telling first: its
    result's ``transition`` (a saturation test's), its primary verdict's and its result's
    message ("" where it has none)."""
    result = test.result if isinstance(test.result, dict) else {}
    primary = test.verdicts.get("primary") if isinstance(test.verdicts, dict) else None
    transition = result.get("transition")
    return (str(transition.get("message") or "") if isinstance(transition, dict) else "",
            str(primary.get("message") or "") if isinstance(primary, dict) else "",
            str(result.get("message") or ""))


def verdict_line(test: TestData) -> str:
    transition, primary, message = found_messages(test)
    if transition:
        return transition + (f"; {primary}" if primary else "")
    if primary or message:
        return primary or message
    return str(test.result.get("error", test.status)) if isinstance(test.result, dict) else ""


#: parameters worth a line for tests of the other suites, in this order
SUITE_PARAMS = ("round_seconds", "max_rounds", "threads", "iodepth", "block_bytes",
                "waits_s", "bursts", "burst_seconds", "target_latency_us", "op_pcts",
                "amount_bytes", "purge")


def _preset_name(p: Mapping[str, object]) -> str | None:
    preset = p.get("preset")
    if isinstance(preset, dict):  # recorded as the preset's identity
        p = preset
        preset = p.get("preset")
    if not preset:
        return None
    return f"preset {preset} v{p.get('preset_version', '?')}"


def params_line(test: TestData) -> str:
    p = test.params
    cells = p.get("cells") or [{}]
    if "rule" not in p or "tracking_set" not in p:  # not a PTS test
        shown = [f"{k.replace('_', ' ')} {p[k]}" for k in SUITE_PARAMS
                 if p.get(k) not in (None, "", [])]
        name = _preset_name(p)
        shown = [name, *shown] if name else shown
        return "  " + ", ".join(shown) if shown else f"  (parameters: see {command()} export)"
    return (
        f"  rule {p.get('rule')} ({p.get('window')}-round window), tracking "
        f"{p.get('tracking_set')}, threads {cells[0].get('threads')} x QD "
        f"{cells[0].get('iodepth')}, {p.get('cell_seconds')} s per cell, "
        f"purge {p.get('purge')}"
    )


def state_text(status: str) -> str:
    """A test's state as ``show`` heads it: a predicted test is not a SNIA steady state."""
    if status == "not_steady":
        return "STEADY STATE NOT REACHED"
    if status == "predicted":
        return f"STEADY STATE NOT REACHED; {PREDICTED_LABEL}"
    return status


def prediction_line(test: TestData) -> str | None:
    """What ``--predict`` stopped on (its message starts with its label), if it did."""
    prediction = test.result.get("prediction") if isinstance(test.result, dict) else None
    if not isinstance(prediction, dict) or not prediction.get("message"):
        return None
    return str(prediction["message"])


# -- what ``ssdlab run`` prints when a run ends ---------------------------------------------


def quick_note(run: RunData, what: str = ": not a valid PTS result") -> str:
    return f" (QUICK profile{what})" if run.quick else ""


def run_line(run: RunData, store_path: object, note: str = "") -> str:
    """``run ID STATUS[ (QUICK ...)]; results in STORE``."""
    return f"run {run.run_id} {run.status_text}{note}; results in {store_path}"


def see_line(run: RunData) -> str:
    cmd = command()
    return f"  see them: {cmd} show {run.run_id}    report: {cmd} report {run.run_id} -o DIR"


def failed_tests_error(run: RunData) -> str | None:
    """The one-line error of a run in which tests failed (None: none did)."""
    failed = [t.name for t in run.tests if t.status == "failed"]
    if not failed:
        return None
    return f"test(s) failed: {', '.join(failed)} (see `{command()} show {run.run_id}`)"
