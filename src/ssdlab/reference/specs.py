"""The vendors' claimed figures (``data/vendor-specs.csv``) and matching a device to them.

Units are in the field names: MB/s are decimal (10^6 bytes per second), IOPS are 4 KiB
random unless a vendor says otherwise, latency is the vendor's "typical" figure in
microseconds, capacity is decimal GB (10^9 bytes). An empty cell is ``None``: the
source does not state it.

Matching a device's model string (as Linux or nvme-cli report it) is driven by
:data:`MATCH_RULES`, a table of patterns documented in docs/reference-data.md.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ssdlab.errors import UserError, command

SPECS_RESOURCE = "data/vendor-specs.csv"


@dataclass(frozen=True)
class VendorSpec:
    """One row of the vendor table: a model at one capacity, as its maker claims it."""

    vendor: str
    model: str
    series: str
    form_factor: str
    interface: str
    capacity_gb: int  # decimal GB
    dwpd: str | None  # drive writes per day; text because sources say "<1"
    seq_read_mb_s: int | None
    seq_write_mb_s: int | None
    rand_read_4k_iops: int | None
    rand_write_4k_iops: int | None
    mixed_70_30_iops: int | None
    latency_read_us: float | None  # "typical"
    latency_write_us: float | None
    endurance_tbw: int | None  # terabytes written over the warranty, 4K random
    warranty_years: int | None
    source: str  # the reference document the figures come from

    @property
    def label(self) -> str:
        """``Micron 7450 PRO 3840 GB``."""
        return f"{self.vendor} {self.model} {self.capacity_gb} GB"

    @property
    def query(self) -> str:
        """A :func:`find_spec` query that selects exactly this row: ``7450 PRO 3840``."""
        return f"{self.model} {self.capacity_gb}"


def _text(value: str) -> str:
    return value


def _optional_text(value: str) -> str | None:
    return value or None


def _whole(value: str) -> int:
    if not re.fullmatch(r"\d+", value):
        raise ValueError("is not a whole number")
    return int(value)


def _optional_whole(value: str) -> int | None:
    return _whole(value) if value else None


def _optional_number(value: str) -> float | None:
    if not value:
        return None
    if not re.fullmatch(r"\d+(\.\d+)?", value):
        raise ValueError("is not a number")
    return float(value)


#: CSV column -> (VendorSpec field, parser). The file's header must be exactly these.
SPEC_COLUMNS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "vendor": ("vendor", _text),
    "model": ("model", _text),
    "series": ("series", _text),
    "form_factor": ("form_factor", _text),
    "interface": ("interface", _text),
    "capacity_gb": ("capacity_gb", _whole),
    "dwpd": ("dwpd", _optional_text),
    "seq_read_mbps": ("seq_read_mb_s", _optional_whole),
    "seq_write_mbps": ("seq_write_mb_s", _optional_whole),
    "rand_read_4k_iops": ("rand_read_4k_iops", _optional_whole),
    "rand_write_4k_iops": ("rand_write_4k_iops", _optional_whole),
    "mixed_70_30_iops": ("mixed_70_30_iops", _optional_whole),
    "latency_read_us": ("latency_read_us", _optional_number),
    "latency_write_us": ("latency_write_us", _optional_number),
    "endurance_tbw": ("endurance_tbw", _optional_whole),
    "warranty_years": ("warranty_years", _optional_whole),
    "source": ("source", _text),
}
_REQUIRED = ("vendor", "model", "capacity_gb", "source")


def parse_specs(text: str, name: str) -> tuple[VendorSpec, ...]:
    """The rows of a vendor table in CSV ``text``; UserError naming ``name`` and the line."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header != list(SPEC_COLUMNS):
        raise UserError(f"{name} line 1: the header must be {','.join(SPEC_COLUMNS)}")
    specs = []
    for row in reader:
        if not row:
            continue
        specs.append(_spec_row(row, name, reader.line_num))
    return tuple(specs)


def _spec_row(row: list[str], name: str, line: int) -> VendorSpec:
    if len(row) != len(SPEC_COLUMNS):
        raise UserError(f"{name} line {line}: {len(row)} fields, expected {len(SPEC_COLUMNS)}")
    values: dict[str, Any] = {}
    for column, raw in zip(SPEC_COLUMNS, row, strict=True):
        field, parse = SPEC_COLUMNS[column]
        raw = raw.strip()
        if column in _REQUIRED and not raw:
            raise UserError(f"{name} line {line}: {column} is empty")
        try:
            values[field] = parse(raw)
        except ValueError as exc:
            raise UserError(f"{name} line {line}: {column} {raw!r} {exc}") from None
    return VendorSpec(**values)


@cache
def _packaged_specs() -> tuple[VendorSpec, ...]:
    text = resources.files("ssdlab.reference").joinpath(SPECS_RESOURCE).read_text(encoding="utf-8")
    return parse_specs(text, "vendor-specs.csv")


def load_specs(path: Path | None = None) -> tuple[VendorSpec, ...]:
    """The vendor table shipped with ssdlab, or the one in ``path`` (same columns)."""
    if path is None:
        return _packaged_specs()
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_specs(text, Path(path).name)


# -- matching a device's model string ----------------------------------------------


@dataclass(frozen=True)
class MatchRule:
    """A device model string that names one model of the vendor table.

    ``pattern`` is a regular expression searched in the model string after it is
    upper-cased and its underscores made spaces (Linux reports ``Micron_7450_...``).
    Its optional group ``cap`` is a capacity code, read as ``capacity_code`` says:
    ``"tb"``: ``3T8`` = 3.8 TB, ``15T3`` = 15.3 TB, ``960`` or ``960G`` = 960 GB;
    ``"hundred_gb"``: ``038`` = 3.8 TB (38 x 100 GB).
    """

    pattern: str
    vendor: str
    model: str
    capacity_code: str = ""
    example: str = ""


_TB_CODE = r"(?P<cap>\d+T\d+|\d{3}G?)"

#: Tried in order; the first rule whose pattern is found decides the model. Part
#: numbers come first: they also say the capacity, and a resized namespace does not
#: change them.
MATCH_RULES: tuple[MatchRule, ...] = (
    # Micron: MTFD K (NVMe) CC (U.3) <capacity> T (TLC) <family>: FR 7450 PRO, FS 7450
    # MAX, GH 9400 PRO, GJ 9400 MAX, GP 7500 PRO. Only U.3 rows are in the table.
    MatchRule(rf"\bMTFDKCC{_TB_CODE}TFR", "Micron", "7450 PRO", "tb", "MTFDKCC3T8TFR-1BC1ZABYY"),
    MatchRule(rf"\bMTFDKCC{_TB_CODE}TGH", "Micron", "9400 PRO", "tb", "MTFDKCC7T6TGH-1BC1ZABYY"),
    MatchRule(rf"\bMTFDKCC{_TB_CODE}TGJ", "Micron", "9400 MAX", "tb", "MTFDKCC12T8TGJ-1BC1ZABYY"),
    # Toshiba/Kioxia: KCM5 / KCD5, one option character, R (CM5-R, read intensive) or
    # L (CD5), two form-factor letters, capacity.
    MatchRule(rf"\bKCM5[0-9A-Z]R[A-Z]{{2}}{_TB_CODE}", "Toshiba", "CM5-R", "tb", "KCM5XRUG7T68"),
    MatchRule(rf"\bKCD5[0-9A-Z]L[A-Z]{{2}}{_TB_CODE}", "Toshiba", "CD5", "tb", "KCD5XLUG7T68"),
    # Western Digital Ultrastar DC SN640: WUS4BB <capacity in 100 GB> (the 0.8 DWPD line;
    # WUS4CB, the 2 DWPD line, is not in the table).
    MatchRule(
        r"\bWUS4BB(?P<cap>\d{3})",
        "Western Digital",
        "Ultrastar DC SN640",
        "hundred_gb",
        "WUS4BB038D7P3E3",
    ),
    # Plain model names: the capacity comes from the device.
    MatchRule(r"\b7450[ -]?PRO\b", "Micron", "7450 PRO", example="Micron 7450 PRO"),
    MatchRule(r"\b9400[ -]?PRO\b", "Micron", "9400 PRO", example="Micron 9400 PRO"),
    MatchRule(r"\b9400[ -]?MAX\b", "Micron", "9400 MAX", example="Micron 9400 MAX"),
    MatchRule(r"\bCM5-?R\b", "Toshiba", "CM5-R", example="CM5-R"),
    MatchRule(r"\bCD5\b", "Toshiba", "CD5", example="KIOXIA CD5"),
    MatchRule(r"\bSN640\b", "Western Digital", "Ultrastar DC SN640", example="WDC SN640"),
)


@dataclass(frozen=True)
class SpecMatch:
    """A matched vendor row and how it was chosen (for reports)."""

    spec: VendorSpec
    reason: str  # e.g. "part number MTFDKCC3T8TFR: capacity code 3T8"


def _normalise(model: str) -> str:
    return " ".join(model.upper().replace("_", " ").split())


def _code_gb(code: str, kind: str) -> float:
    if kind == "hundred_gb":
        return int(code) * 100.0
    if "T" in code:
        whole, fraction = code.split("T")
        return float(f"{whole}.{fraction}") * 1000
    return float(code.removesuffix("G"))


def _rule_match(model: str) -> tuple[MatchRule, re.Match[str]] | None:
    text = _normalise(model)
    for rule in MATCH_RULES:
        found = re.search(rule.pattern, text)
        if found:
            return rule, found
    return None


def _rows_of(rule: MatchRule, specs: Sequence[VendorSpec]) -> list[VendorSpec]:
    return [s for s in specs if s.vendor == rule.vendor and s.model == rule.model]


def _closest(rows: Sequence[VendorSpec], capacity_gb: float) -> VendorSpec:
    return min(rows, key=lambda s: (abs(s.capacity_gb - capacity_gb), s.capacity_gb))


def match_spec_explained(
    model: str | None, capacity_bytes: int | None, specs: Sequence[VendorSpec] | None = None
) -> SpecMatch | None:
    """Like :func:`match_spec`, with the reason for the choice."""
    found = _rule_match(model) if model else None
    if found is None:
        return None
    rule, hit = found
    rows = _rows_of(rule, load_specs() if specs is None else specs)
    code = hit.groupdict().get("cap")
    if not rows:
        return None
    if code:
        wanted = _code_gb(code, rule.capacity_code)
        reason = f"part number {hit.group(0)}: capacity code {code}"
    elif capacity_bytes:
        wanted = capacity_bytes / 1e9
        reason = f"model name {hit.group(0)!r}, device capacity {wanted:,.0f} GB"
    elif len(rows) == 1:
        return SpecMatch(rows[0], f"model name {hit.group(0)!r} (one capacity listed)")
    else:
        return None  # several capacities and nothing to choose by
    return SpecMatch(_closest(rows, wanted), reason)


def match_spec(
    model: str | None, capacity_bytes: int | None, specs: Sequence[VendorSpec] | None = None
) -> VendorSpec | None:
    """The vendor row for a device's model string, or None if no rule knows the model.

    ``model`` is what Linux or nvme-cli report (``MTFDKCC3T8TFR-1BC1ZABYY``,
    ``Micron_7450_MTFDKCC3T8TFR``, ``KCM51RUG7T68``, ``WUS4BB038D7P3E3``) or a plain
    name (``Micron 7450 PRO``, ``WDC SN640``, ``CM5-R``). Among the model's capacities
    the closest one is chosen: to the capacity in the part number if it has one, else to
    ``capacity_bytes`` (decimal GB in the table). Several capacities and neither gives
    None. ``specs`` defaults to :func:`load_specs`.
    """
    found = match_spec_explained(model, capacity_bytes, specs)
    return None if found is None else found.spec


# -- the user's explicit choice ------------------------------------------------------

#: Other names a query may use for a vendor of the table.
VENDOR_ALIASES: dict[str, tuple[str, ...]] = {
    "Western Digital": ("wd", "wdc", "hgst"),
    "Toshiba": ("kioxia",),
}
_CAPACITY_TOKEN = re.compile(r"(\d+(?:\.\d+)?)(gb|g|tb|t)?")


def _words(spec: VendorSpec) -> set[str]:
    text = f"{spec.vendor} {spec.model} {spec.series}".lower()
    return {*text.split(), *VENDOR_ALIASES.get(spec.vendor, ())}


def _capacity_matches(token: str, spec: VendorSpec) -> bool:
    found = _CAPACITY_TOKEN.fullmatch(token)
    if not found:
        return False
    value = float(found.group(1)) * (1000 if found.group(2) in ("tb", "t") else 1)
    return abs(value - spec.capacity_gb) <= 0.01 * spec.capacity_gb


def find_specs(query: str, specs: Sequence[VendorSpec] | None = None) -> list[VendorSpec]:
    """Every row a query selects (all rows for an empty query).

    Each word of the query must be a word of the row's vendor, model or series (vendor
    aliases such as WD and Kioxia count) or its capacity (``3840``, ``3840GB``,
    ``3.84TB``, within 1 %). A query no row matches that way is tried as a device
    model string (:data:`MATCH_RULES`): a part number selects its row, a single word
    such as ``CM5R`` its model's rows.
    """
    specs = load_specs() if specs is None else specs
    tokens = query.lower().split()
    chosen = [s for s in specs if all(t in _words(s) or _capacity_matches(t, s) for t in tokens)]
    if chosen or not tokens:
        return chosen
    found = _rule_match(query)
    if found is None:
        return []
    rule, hit = found
    rows = _rows_of(rule, specs)
    code = hit.groupdict().get("cap")
    if code and rows:  # a part number: its capacity code picks the row
        return [_closest(rows, _code_gb(code, rule.capacity_code))]
    return rows if len(tokens) == 1 else []  # "CM5R"; not "7450 PRO 4000"


def find_spec(query: str, specs: Sequence[VendorSpec] | None = None) -> VendorSpec:
    """The one row a user's query names (``7450 PRO 3840``, ``Micron 9400 MAX 12800``,
    ``SN640``); UserError, in one line, when it names none or several."""
    chosen = find_specs(query, specs)
    if len(chosen) == 1:
        return chosen[0]
    if not chosen:
        raise UserError(f"no vendor spec matches {query!r} (see `{command()} specs`)")
    listed = "; ".join(s.label for s in chosen)
    raise UserError(
        f"{query!r} matches {len(chosen)} vendor specs ({listed}); "
        f"name one, e.g. {chosen[0].query!r}"
    )
