"""build_options validation and defaults; size and duration units."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssdlab.engine.jobfile import render
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.optionsets import default_load
from ssdlab.plan.pts import PtsArgs, build_options, build_pts_tests
from ssdlab.plan.specs import FioJob
from ssdlab.units import format_bytes, format_duration, parse_size

KIB = 1024
MIB = 1024 * KIB


def refused(args: PtsArgs, device_class: str = "file", cpus: int = 8) -> str:
    with pytest.raises(UserError) as info:
        build_options(args, device_class, cpus)
    message = info.value.message
    assert "\n" not in message, message
    assert message.strip() == message and message
    assert info.value.exit_code is ExitCode.USAGE
    return message


# --------------------------------------------------------------------------- refusals

BAD_VALUES: list[tuple[dict[str, object], str]] = [
    # (PtsArgs fields, text the message must contain)
    ({"profile": "fast"}, "'fast'"),
    ({"variant": "vendor"}, "'vendor'"),
    ({"rule": "strict"}, "'strict'"),
    ({"tracking": "v3.0"}, "'v3.0'"),
    ({"purge": "shred"}, "'shred'"),
    ({"ioengine": "spdk"}, "'spdk'"),
    ({"round_seconds": 0.0}, "--round-seconds 0"),
    ({"round_seconds": -1.0}, "--round-seconds -1"),
    ({"round_seconds": 7200.0}, "--round-seconds 7200"),
    ({"max_rounds": 0}, "--max-rounds 0"),
    ({"max_rounds": -3}, "--max-rounds -3"),
    ({"max_rounds": 2.5}, "--max-rounds 2.5"),
    ({"threads": 0}, "--threads 0"),
    ({"threads": -2}, "--threads -2"),
    ({"iodepth": 0}, "--qd 0"),
    ({"iodepth": -8}, "--qd -8"),
    ({"active_range_pct": 0.0}, "--active-range 0"),
    ({"active_range_pct": -5.0}, "--active-range -5"),
    ({"active_range_pct": 150.0}, "--active-range 150"),
    ({"mixes": "60/30"}, "'60/30'"),
    ({"mixes": "abc"}, "'abc'"),
    ({"mixes": "101"}, "101"),
    ({"mixes": "65/35,100,65/35"}, "'65/35,100,65/35'"),
    ({"mixes": "65/35,65"}, "'65/35,65'"),
    ({"latency_mixes": "70/20"}, "'70/20'"),
    ({"block_sizes": "700b"}, "'700b'"),
    ({"block_sizes": "0"}, "'0'"),
    ({"block_sizes": "128MiB"}, "'128MiB'"),
    ({"block_sizes": "4,4k"}, "'4,4k'"),
    ({"block_sizes": "4,abc"}, "'abc'"),
    ({"block_sizes": "1.5b"}, "'1.5b'"),
    ({"block_sizes": "4XB"}, "'4XB'"),
    ({"latency_block_sizes": "700b"}, "'700b'"),
    ({"tests": ""}, "--tests"),
    ({"tests": " , "}, "--tests"),
    ({"tests": "iops,bogus"}, "'bogus'"),
    ({"tests": "throughput-1024k"}, "'throughput-1024k'"),
]


@pytest.mark.parametrize(
    ("fields", "needle"),
    BAD_VALUES,
    ids=[f"{k}={v!r}" for (f, _) in BAD_VALUES for k, v in f.items()],
)
def test_a_bad_value_is_a_one_line_user_error_naming_it(
    fields: dict[str, object], needle: str
) -> None:
    message = refused(PtsArgs(**fields))  # type: ignore[arg-type]
    assert needle in message


@pytest.mark.parametrize(
    ("option", "field"),
    [
        ("--mixes", "mixes"),
        ("--latency-mixes", "latency_mixes"),
        ("--block-sizes", "block_sizes"),
        ("--latency-block-sizes", "latency_block_sizes"),
    ],
)
def test_list_errors_name_the_option(option: str, field: str) -> None:
    assert refused(PtsArgs(**{field: "zzz"})).startswith(option)  # type: ignore[arg-type]


def test_choice_errors_list_what_is_allowed() -> None:
    message = refused(PtsArgs(ioengine="spdk"))
    assert "--ioengine" in message
    for engine in ("libaio", "io_uring", "psync", "sync"):
        assert engine in message


@pytest.mark.parametrize(("rule", "window"), [("snia", 5), ("review", 4)])
def test_max_rounds_below_the_rule_window_is_refused(rule: str, window: int) -> None:
    message = refused(PtsArgs(rule=rule, max_rounds=window - 1))
    assert f"--max-rounds {window - 1}" in message
    assert f"{window}-round" in message
    assert build_options(PtsArgs(rule=rule, max_rounds=window), "file", 8).max_rounds == window


def test_reviews_variant_defaults_to_the_review_rule_window() -> None:
    # the review rule's window is 4, so 4 rounds are enough there but not for snia
    assert build_options(PtsArgs(variant="reviews", max_rounds=4), "file", 8).rule == "review"
    refused(PtsArgs(variant="snia", max_rounds=4))


# --------------------------------------------------------------------------- defaults


@pytest.mark.parametrize(
    ("profile", "seconds", "rounds"), [("quick", 0.5, 8), ("default", 60.0, 25)]
)
def test_profile_timing(profile: str, seconds: float, rounds: int) -> None:
    opts = build_options(PtsArgs(profile=profile), "file", 8)
    assert opts.profile == profile
    assert opts.cell_seconds == seconds
    assert opts.max_rounds == rounds
    assert opts.quick is (profile == "quick")


def test_defaults_are_the_snia_pts() -> None:
    opts = build_options(PtsArgs(), "file", 8)
    assert opts.tests == ("iops", "throughput", "latency")
    assert (opts.variant, opts.rule, opts.tracking) == ("snia", "snia", "v2.0")
    assert opts.iops_block_bytes == (
        MIB,
        128 * KIB,
        64 * KIB,
        32 * KIB,
        16 * KIB,
        8 * KIB,
        4 * KIB,
        512,
    )
    assert opts.iops_mixes == (100, 95, 65, 50, 35, 5, 0)
    assert opts.latency_block_bytes == (8 * KIB, 4 * KIB, 512)
    assert opts.latency_mixes == (100, 65, 0)
    assert (opts.purge, opts.precondition, opts.ioengine) == ("auto", True, "libaio")
    assert opts.active_range_pct == 100.0


def test_explicit_values_override_the_defaults() -> None:
    args = PtsArgs(
        profile="quick",
        variant="reviews",
        tests="latency, iops",
        rule="snia",
        tracking="v1.1",
        round_seconds=2.0,
        max_rounds=10,
        threads=3,
        iodepth=5,
        active_range_pct=40.0,
        block_sizes="4k,512b,1",
        mixes="65/35, 100",
        latency_block_sizes="16",
        latency_mixes="0/100",
        purge="none",
        precondition=False,
        ioengine="io_uring",
    )
    opts = build_options(args, "nvme", 2)
    assert opts.tests == ("iops", "latency")  # in PTS order, whatever the order typed
    assert (opts.variant, opts.rule, opts.tracking) == ("reviews", "snia", "v1.1")
    assert (opts.cell_seconds, opts.max_rounds) == (2.0, 10)
    assert (opts.threads, opts.iodepth) == (3, 5)
    assert opts.active_range_pct == 40.0
    assert opts.iops_block_bytes == (4096, 512, 1024)
    assert opts.iops_mixes == (65, 100)
    assert opts.latency_block_bytes == (16 * KIB,)
    assert opts.latency_mixes == (0,)
    assert (opts.purge, opts.precondition, opts.ioengine) == ("none", False, "io_uring")


def test_block_sizes_without_unit_are_kib() -> None:
    opts = build_options(PtsArgs(block_sizes="4k,512b,1,64,1MiB"), "file", 8)
    assert opts.iops_block_bytes == (4096, 512, 1024, 64 * KIB, MIB)
    opts = build_options(PtsArgs(latency_block_sizes="0.5, 8"), "file", 8)
    assert opts.latency_block_bytes == (512, 8 * KIB)


def test_half_k_written_twice_is_a_duplicate() -> None:
    assert "twice" in refused(PtsArgs(block_sizes="0.5,512b"))


def test_options_are_frozen() -> None:
    opts = build_options(PtsArgs(), "file", 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.threads = 1  # type: ignore[misc]


# --------------------------------------------------------------------------- load


def test_nvme_on_two_cpus_keeps_outstanding_io() -> None:
    assert default_load("nvme", 2) == (2, 64)
    opts = build_options(PtsArgs(), "nvme", 2)
    assert (opts.threads, opts.iodepth) == (2, 64)


@pytest.mark.parametrize(
    ("device_class", "cpus", "expected"),
    [
        ("nvme", 64, (16, 8)),
        ("nvme", 16, (16, 8)),
        ("nvme", 4, (4, 32)),
        ("nvme", 1, (1, 128)),
        ("sata_ssd", 8, (8, 16)),
        ("sas_ssd", 2, (2, 64)),
        ("hdd", 2, (1, 16)),
        ("hdd", 1, (1, 16)),
        ("virtual", 2, (2, 32)),
        ("file", 64, (4, 16)),
        ("file", 1, (1, 64)),
        ("something-new", 64, (4, 16)),
    ],
)
def test_default_load(device_class: str, cpus: int, expected: tuple[int, int]) -> None:
    assert default_load(device_class, cpus) == expected


@given(st.sampled_from(["nvme", "sata_ssd", "hdd", "virtual", "file"]), st.integers(0, 512))
def test_default_load_never_exceeds_cpus_or_outstanding_io(device_class: str, cpus: int) -> None:
    full = {"nvme": 128, "sata_ssd": 128, "hdd": 16, "virtual": 64, "file": 64}[device_class]
    threads, depth = default_load(device_class, cpus)
    assert 1 <= threads <= max(1, cpus)
    # floor division may lose less than one I/O per thread, never add any
    assert full - threads < threads * depth <= full


def test_explicit_load_overrides_the_default() -> None:
    opts = build_options(PtsArgs(threads=32, iodepth=1), "nvme", 2)
    assert (opts.threads, opts.iodepth) == (32, 1)
    opts = build_options(PtsArgs(iodepth=4), "nvme", 2)
    assert (opts.threads, opts.iodepth) == (2, 4)


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1GiB", 2**30),
        ("1G", 2**30),
        ("1g", 2**30),
        ("1GB", 10**9),
        ("4k", 4096),
        ("4K", 4096),
        ("4KiB", 4096),
        ("4kb", 4000),
        ("512", 512),
        ("512b", 512),
        ("512B", 512),
        (" 2 MiB ", 2 * 2**20),
        ("3m", 3 * 2**20),
        ("5MB", 5 * 10**6),
        ("1.5k", 1536),
        ("0.5MiB", 2**19),
        ("2t", 2 * 2**40),
        ("2TB", 2 * 10**12),
        ("0", 0),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["1.5b", "1.5", "abc", "1XB", "", "k", "-1", "1 2", "1e3", "1kk"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_size(text)
    assert repr(text) in str(info.value)


def test_parse_size_default_unit_applies_only_without_a_unit() -> None:
    assert parse_size("4", default_unit="kib") == 4096
    assert parse_size("0.5", default_unit="kib") == 512
    assert parse_size("4b", default_unit="kib") == 4
    assert parse_size("4m", default_unit="kib") == 4 * 2**20


@given(
    st.integers(min_value=0, max_value=2**22),  # times 2**30 stays below 2**53
    st.sampled_from(
        [
            ("", 1),
            ("b", 1),
            ("k", 2**10),
            ("KiB", 2**10),
            ("KB", 10**3),
            ("M", 2**20),
            ("mib", 2**20),
            ("MB", 10**6),
            ("G", 2**30),
            ("GiB", 2**30),
            ("gb", 10**9),
        ]
    ),
)
def test_parse_size_of_a_whole_number_with_a_unit(number: int, unit: tuple[str, int]) -> None:
    suffix, factor = unit
    assert parse_size(f"{number}{suffix}") == number * factor


@given(st.text(max_size=200))
def test_parse_size_raises_only_value_error(text: str) -> None:
    try:
        value = parse_size(text)
    except ValueError:
        return
    assert isinstance(value, int)
    assert value >= 0


@given(st.from_regex(r"\A\s?[0-9]{1,30}(\.[0-9]{1,8})?\s?[a-zA-Z]{0,3}\s?\Z"))
def test_parse_size_of_size_like_text_raises_only_value_error(text: str) -> None:
    try:
        value = parse_size(text)
    except ValueError:
        return
    assert isinstance(value, int)
    assert value >= 0


@pytest.mark.parametrize("text", ["9" * 400, "1" + "0" * 300 + "T"])
def test_parse_size_of_an_absurdly_large_number_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_parse_size_is_exact_for_large_whole_numbers() -> None:
    assert parse_size("18014398509481985") == 18014398509481985


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (4096, "4 KiB"),
        (64 * 2**20, "64 MiB"),
        (2**30, "1 GiB"),
        (10**12, "931.32 GiB"),
        (5 * 2**40, "5 TiB"),
        (int(1.5 * 2**40), "1.5 TiB"),
    ],
)
def test_format_bytes(count: int, text: str) -> None:
    assert format_bytes(count) == text


@pytest.mark.parametrize("count", [1000 * 2**30, 1020 * 2**10, 2000 * 2**40])
def test_format_bytes_never_uses_scientific_notation(count: int) -> None:
    assert "e+" not in format_bytes(count)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0:00"),
        (0.4, "0:00"),
        (59.6, "1:00"),
        (61, "1:01"),
        (3599, "59:59"),
        (3600, "1:00:00"),
        (90061, "25:01:01"),
        (-5, "0:00"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_a_round_time_fio_cannot_express_is_refused_up_front() -> None:
    try:
        opts = build_options(PtsArgs(round_seconds=0.0004), "file", 8)
    except UserError:
        return  # the fixed behaviour
    tests = build_pts_tests(opts, 2**30, 512)
    render(FioJob("/tmp/x", tests[0].round_cells))
