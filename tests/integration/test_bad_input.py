"""Every option of every ``ssdlab run`` suite, given a bad value, is refused the same way.

Black box: the real command in a subprocess. Each refusal is one line ``Error: ...`` on
stderr naming the bad value, exit code 2 (bad value) or the documented code of the
check that caught it, and nothing written: no test file, no results store. The commands
run without ``--dry-run`` (a refusal must not depend on it), on a test file that does not
exist yet, with a fake fio that reports a good version and fails anything else, so a
value wrongly accepted fails fast instead of starting a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import one_line_error, ssdlab, ssdlab_in_process

BIG = "9" * 30
#: (option and value(s), text the message must contain; default: the bad value itself)
Case = tuple[list[str], str | None]
SHARED: list[Case] = [
    (["--size", "0"], None), (["--size", "-1"], None), (["--size", "1ZB"], None),
    (["--size", "1.5"], None), (["--size", ""], "''"), (["--size", "1 parsec"], None),
    (["--size", "nan"], None),
    (["--config", "no-such-file.toml"], "no-such-file.toml"),
]
PTS: list[Case] = [
    (["--profile", "fast"], None), (["--variant", "vendor"], None), (["--tests", ""], "empty"),
    (["--tests", "iops,iops"], None), (["--tests", "iops,bogus"], "bogus"),
    (["--rule", "strict"], None), (["--tracking", "v3.0"], None),
    (["--round-seconds", "nan"], None), (["--round-seconds", "inf"], None),
    (["--round-seconds", "-1"], None), (["--round-seconds", "0"], None),
    (["--round-seconds", "0.0004"], None), (["--round-seconds", "1e9"], "1e+09"),
    (["--round-seconds", "1s"], None), (["--max-rounds", "0"], None),
    (["--max-rounds", "-1"], None), (["--max-rounds", "2.5"], None),
    (["--max-rounds", "x"], None), (["--max-rounds", "3"], None),
    (["--max-rounds", BIG], "1e+30"), (["--threads", "0"], None),
    (["--threads", "100000"], None), (["--threads", "²"], None), (["--qd", "0"], None),
    (["--qd", "5000"], None), (["--active-range", "0"], None),
    (["--active-range", "nan"], None), (["--active-range", "150"], None),
    (["--active-range", "-5"], None), (["--block-sizes", ""], "empty"),
    (["--block-sizes", "4,4"], None), (["--block-sizes", "700b"], None),
    (["--block-sizes", "1ZB"], None), (["--block-sizes", "0"], None),
    (["--block-sizes", "128M"], None), (["--block-sizes", "4,,8"], "''"),
    (["--mixes", ""], "empty"), (["--mixes", "60/30"], None), (["--mixes", "101"], None),
    (["--mixes", "65/35,65/35"], None), (["--mixes", "x"], None), (["--mixes", "²"], None),
    (["--mixes", "-10"], None), (["--latency-block-sizes", ""], "empty"),
    (["--latency-block-sizes", "0.3"], None), (["--latency-mixes", ""], "empty"),
    (["--latency-mixes", "50/50,50"], None), (["--purge", "shred"], None),
    (["--purge", "blkdiscard"], None), (["--ioengine", "spdk"], None),
]
LATENCY_IOPS: list[Case] = [
    (["--profile", "x"], None), (["--block-sizes", ""], "empty"),
    (["--block-sizes", "0.1"], None), (["--mixes", "70/20"], None), (["--mixes", ""], "empty"),
    (["--threads", ""], "empty"), (["--threads", "0"], None), (["--threads", "2,1"], None),
    (["--threads", "1,1"], None), (["--threads", "²"], None), (["--threads", "257"], None),
    (["--threads", "-1"], None), (["--qd", ""], "empty"), (["--qd", "8,4"], None),
    (["--qd", "4097"], None), (["--qd", "x"], None), (["--qd", BIG], None),
    (["--max-qd", "0"], None), (["--max-qd", "-1"], None), (["--max-qd", "5000"], None),
    (["--max-qd", "x"], None), (["--max-threads", "0"], None),
    (["--max-threads", "1000"], None), (["--target-latency-us", "0"], None),
    (["--target-latency-us", "nan"], None), (["--target-latency-us", "inf"], None),
    (["--target-latency-us", "-5"], None), (["--target-latency-us", "1e12"], "1e+12"),
    (["--min-iops-rise", "-1"], None), (["--min-iops-rise", "nan"], None),
    (["--min-iops-rise", "101"], None), (["--warmup-seconds", "-1"], None),
    (["--warmup-seconds", "nan"], None), (["--warmup-seconds", "0.0001"], None),
    (["--warmup-seconds", "1e-9"], "1e-09"),
    (["--warmup-seconds", "4000"], None), (["--measure-seconds", "0"], None),
    (["--measure-seconds", "0.05"], None), (["--measure-seconds", "nan"], None),
    (["--host-bound-cpu", "0"], None), (["--host-bound-cpu", "nan"], None),
    (["--host-bound-cpu", "101"], None), (["--host-bound-rise", "-1"], None),
    (["--host-bound-rise", "101"], None), (["--host-bound-rise", "nan"], None),
    (["--active-range", "0"], None), (["--active-range", "nan"], None),
    (["--purge", "x"], None), (["--purge", "nvme-format"], None), (["--ioengine", "x"], None),
]
OP_SWEEP: list[Case] = [
    (["--profile", "x"], None), (["--op", ""], "''"), (["--op", "nan"], None),
    (["--op", "91"], None), (["--op", "-1"], None), (["--op", "10,10"], None),
    (["--op", "a"], None), (["--op", "95"], None), (["--round-seconds", "nan"], None),
    (["--round-seconds", "0"], None), (["--round-seconds", "0.05"], None),
    (["--round-seconds", "4000"], None), (["--max-rounds", "0"], None),
    (["--max-rounds", "3"], None), (["--max-rounds", "1001"], None), (["--rule", "x"], None),
    (["--threads", "0"], None), (["--threads", "257"], None), (["--qd", "0"], None),
    (["--qd", "5000"], None), (["--min-gain", "0"], None), (["--min-gain", "nan"], None),
    (["--min-gain", "-1"], None), (["--min-gain", "101"], None), (["--purge", "none"], None),
    (["--purge", "nvme-sanitize"], None), (["--ioengine", "x"], None),
]
SATURATION: list[Case] = [
    (["--profile", "x"], None), (["--round-seconds", "0"], None),
    (["--round-seconds", "nan"], None), (["--round-seconds", "1e308"], "1e+308"),
    (["--round-seconds", "0.0001"], None), (["--max-rounds", "0"], None),
    (["--max-rounds", "2.5"], None), (["--max-rounds", "1000000"], None),
    (["--max-written", "0"], None), (["--max-written", "nan"], None),
    (["--max-written", "1e308"], "1e+308"), (["--max-hours", "0"], None),
    (["--max-hours", "inf"], None), (["--max-hours", "1e9"], "1000000000"),
    (["--threads", "0"], None), (["--threads", "1000"], None), (["--qd", "0"], None),
    (["--qd", "100000"], None), (["--active-range", "0"], None),
    (["--active-range", "101"], None), (["--purge", "x"], None),
    (["--purge", "nvme-format"], None), (["--ioengine", "x"], None), (["--waits", ""], "''"),
    (["--waits", "5,5"], None), (["--waits", "nan"], None), (["--waits", "-1"], None),
    (["--waits", "x"], None), (["--waits", "1e9"], None), (["--burst-seconds", "0"], None),
    (["--burst-seconds", "0.0001"], None), (["--burst-seconds", "nan"], None),
    (["--burst-seconds", "1e9"], "1000000000"), (["--bursts", "0"], None),
    (["--bursts", "10000000"], None), (["--baseline-rounds", "0"], None),
    (["--baseline-rounds", "-1"], None), (["--recovery-ratio", "1"], None),
    (["--recovery-ratio", "0.5"], None), (["--recovery-ratio", "nan"], None),
    (["--recovery-ratio", "inf"], None), (["--recovery-ratio", "1000"], None),
]
SLC_PROBE: list[Case] = [
    (["--profile", "x"], None), (["--write-size", "0"], None),
    (["--write-size", "1MiB"], "1 MiB"), (["--write-size", "1e3"], None),
    (["--write-size", "10TiB"], "10 TiB"), (["--block-size", ""], "empty"),
    (["--block-size", "700b"], None), (["--block-size", "4,8"], None),
    (["--block-size", "1ZB"], None), (["--block-size", "0"], None), (["--block-size", "²"], None),
    (["--qd", "0"], None), (["--qd", "2000"], None), (["--log", "x"], None),
    (["--log-interval", "0"], None), (["--log-interval", "-1"], None),
    (["--log-interval", "100000"], None), (["--log", "io", "--log-interval", "100"], "--log io"),
    (["--slice", "0"], None), (["--slice", "4KiB"], "4 KiB"), (["--slice", "1TiB"], "1 TiB"),
    (["--min-drop", "0"], None), (["--min-drop", "100"], None), (["--min-drop", "nan"], None),
    (["--min-drop", "-5"], None), (["--settle", "-1"], None), (["--settle", "nan"], None),
    (["--settle", "1e9"], "1e+09"), (["--repeat-after", "-1"], None),
    (["--repeat-after", "inf"], None), (["--repeat-after", "1e9"], "1e+09"),
    (["--purge", "blkdiscard"], None), (["--purge", "x"], None), (["--ioengine", "x"], None),
]
VERIFY: list[Case] = [
    (["--block-size", ""], "''"), (["--block-size", "700b"], None),
    (["--block-size", "x"], None), (["--block-size", "0"], None), (["--block-size", "²"], None),
    (["--pattern", "x"], None), (["--checksum", "crc1"], None),
    (["--interval", "3"], None), (["--interval", ""], "''"), (["--interval", "256"], None),
    (["--qd", "0"], None), (["--qd", "2000"], None), (["--qd", "x"], None),
    (["--active-range", "0"], None), (["--active-range", "nan"], None),
    (["--active-range", "101"], None), (["--ioengine", "x"], None),
]
TRACE = ["--trace", str(Path(__file__).parents[1] / "data" / "replay-sample.iolog")]
#: the review presets (their own unit tests go through every option; here each is refused
#: black-box, with nothing written)
PRESETS: dict[str, list[Case]] = {
    "cdm": [(["--passes", "0"], None), (["--set", "x"], None), (["--mix-read-pct", "101"], None),
            (["--measure-seconds", "nan"], None), (["--profile", "x"], None)],
    "atto": [(["--qd", "0"], None), (["--min-size", "3"], None), (["--factor", "1"], None)],
    "iometer": [(["--set", "y"], None), (["--qd", "0"], None), (["--seconds", "-1"], None)],
    "aja": [(["--resolution", "0x0"], None), (["--pixel-format", "z"], None)],
    "diskfill": [(["--passes", "0"], None)],
    "smallfiles": [(["--wait-seconds", "-1"], None), (["--file-size", "0"], None)],
    "copy": [(["--repetitions", "0"], None), (["--sets", "x"], None)],
    "curves": [(["--workload", "nope"], None), (["--fractions", "0"], None),
               (["--fill-region", "150"], None),
               # found by the config fuzzer: below fio's millisecond resolution they crashed
               (["--ramp", "1e-9"], "--ramp 1e-09"), (["--seconds", "0.0004"], None),
               (["--ramp", "0.0015"], None), (["--ramp", "1e308"], "1e+308")],
    "replay": [(["--trace", "/nonexistent.iolog"], None), ([*TRACE, "--time-scale", "0"], None),
               ([*TRACE, "--qd", "0"], None), ([*TRACE, "--max-seconds", "1e-9"], "1e-09")],
}
SUITES = {"pts": PTS, "latency-iops": LATENCY_IOPS, "op-sweep": OP_SWEEP,
          "saturation": SATURATION, "slc-probe": SLC_PROBE, "verify": VERIFY, **PRESETS}
#: the shared target options (plan.optionsets) everywhere: all of them once, two per suite
CASES = [
    pytest.param(suite, args, needle, id=f"{suite} {' '.join(args)}")
    for suite, cases in SUITES.items()
    for args, needle in [*cases, *(SHARED if suite == "pts" else [] if suite in PRESETS
                                   else SHARED[:1] + SHARED[-1:])]
]
#: refusals by a later check than the option's own, with the code documented for it
OTHER_CODES = {("--size", "9" * 15 + "T"): 3, ("--fio", "no-such-fio"): 4}


@pytest.fixture(scope="module")
def fake_fio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Reports fio 3.33, fails everything else: a value wrongly accepted fails fast."""
    path = tmp_path_factory.mktemp("fio") / "fio"
    path.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo fio-3.33; exit 0; }\n'
                    'echo "fake fio: a bad value was accepted" >&2\nexit 1\n')
    path.chmod(0o755)
    return path


@dataclass(frozen=True)
class Refusal:
    line: str  # the one error line
    code: int
    stdout: str
    wrote: bool  # the test file or the results store exists afterwards


def attempt(workdir: Path, fio: Path, suite: str, args: list[str], size: bool = True,
            in_process: bool = False) -> Refusal:
    """Run the suite with ``args`` on a new test file in ``workdir``."""
    target, store = workdir / "t.img", workdir / "s.sqlite"
    sized = ["--size", "256MiB"] if size and "--size" not in args else []
    argv = ("run", suite, "--target", str(target), *sized, "--store", str(store),
            "--fio", str(fio), *args)
    result = ssdlab_in_process(*argv) if in_process else ssdlab(*argv, timeout=120)
    return Refusal(one_line_error(result), result.returncode, result.stdout,
                   target.exists() or store.exists())


def check(refusal: Refusal, code: int = 2) -> str:
    assert refusal.code == code, (refusal.code, refusal.line)
    assert refusal.stdout == "" and not refusal.wrote, refusal
    return refusal.line


@pytest.fixture(scope="module")
def refusals(
    tmp_path_factory: pytest.TempPathFactory, fake_fio: Path
) -> dict[tuple[str, ...], Refusal]:
    """Every case, in this process (the same code path as the command, ~300 interpreters
    fewer); the config-file, store and exit-code tests below run the real command."""
    out = {}
    for case in CASES:
        suite, args, _ = case.values
        assert isinstance(suite, str) and isinstance(args, list)
        out[(suite, *args)] = attempt(tmp_path_factory.mktemp("case"), fake_fio, suite, args,
                                      in_process=True)
    return out


@pytest.mark.parametrize(("suite", "args", "needle"), CASES)
def test_bad_value_is_refused_before_any_io(
    refusals: dict[tuple[str, ...], Refusal], suite: str, args: list[str], needle: str | None
) -> None:
    line = check(refusals[(suite, *args)])
    assert (needle or args[-1]) in line, line


@pytest.mark.parametrize(("option", "value"), sorted(OTHER_CODES))
def test_later_checks_keep_their_codes(
    tmp_path: Path, fake_fio: Path, option: str, value: str
) -> None:
    line = check(attempt(tmp_path, fake_fio, "pts", [option, value]), OTHER_CODES[(option, value)])
    assert value in line or "free space" in line, line


def test_a_store_that_is_not_sqlite_is_left_alone(tmp_path: Path, fake_fio: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database " * 100)
    result = ssdlab("run", "pts", "--target", str(tmp_path / "t.img"), "--size", "256MiB",
                    "--store", str(junk), "--fio", str(fake_fio), timeout=60)
    assert result.returncode == 4
    assert "not an SQLite database" in one_line_error(result)
    assert junk.read_bytes() == b"not a database " * 100
    assert not (tmp_path / "t.img").exists()


BAD_CONFIGS: list[tuple[str, str, str]] = [
    # (file name, content, text the message must contain)
    ("run.toml", 'max-rounds = "x"\n', "max-rounds 'x' is not a whole number"),
    ("run.toml", "max_round = 8\n", "unknown key 'max_round' for ssdlab run pts (did you mean "
     "'max-rounds'?)"),
    ("run.toml", "max-rounds = 3\n", "max-rounds 3 is smaller than the snia rule's"),
    ("run.toml", "round-seconds = nan\n", "round-seconds nan is not a number"),
    ("run.toml", "round-seconds = -inf\n", "round-seconds -inf"),
    ("run.toml", f"max-rounds = {BIG}\n", "max-rounds"),
    ("run.toml", 'profile = "fast"\n', "profile 'fast' is not one of: default, quick"),
    ("run.toml", "block-sizes = []\n", "block-sizes [] is not a list"),
    ("run.toml", "block-sizes = [4, 4]\n", "'4,4' lists a block size twice"),
    ("run.toml", 'block-sizes = ""\n', "block-sizes is empty"),
    ("run.toml", "mixes = [[65, 35]]\n", "mixes [an array of 2 items] is not a list"),
    ("run.toml", "max-rounds = 8\nmax_rounds = 9\n", "max-rounds is given twice"),
    ("run.toml", "max-rounds = 8\nmax-rounds = 9\n", "not valid TOML"),
    ("run.toml", "target = '/dev/sda'\n", "target cannot be set in a config file"),
    ("run.toml", "destroy-data = true\n", "destroy-data cannot be set in a config file"),
    ("run.toml", "dry_run = true\n", "dry_run cannot be set in a config file"),
    ("run.toml", "[saturation]\nbursts = 3\n", "for the saturation suite"),
    ("run.toml", "[tables]\nx = 1\n", "[tables] is not a suite"),
    ("run.toml", "no-precondition = 1\n", "no-precondition 1 is not true or false"),
    ("run.toml", 'size = "1ZB"\n', "size '1ZB'"),
    ("run.toml", 'fio = "a\\u0000b"\n', "control character"),
    ("run.toml", "x = 1979-05-27\n", "unknown key 'x'"),
    ("run.toml", "tests = 1979-05-27\n", "tests date 1979-05-27 is not a list"),
    ("run.json", '{"max-rounds": NaN}', "NaN"),
    ("run.json", '{"size": "1GiB", "size": "2GiB"}', "key 'size' is given twice"),
    ("run.json", "[1, 2]", "must hold a JSON object"),
    ("run.json", "[" * 100_000, "not valid JSON: nested too deeply"),
    ("run.toml", "a = " + "[" * 100_000, "not valid TOML: nested too deeply"),
    ("run.yaml", "max-rounds: 8\n", "give a .toml or .json file"),
]


@pytest.mark.parametrize(("name", "content", "needle"), BAD_CONFIGS,
                         ids=[f"{n}: {c[:30]!r}" for n, c, _ in BAD_CONFIGS])
def test_bad_config_is_refused_before_any_io(
    tmp_path: Path, fake_fio: Path, name: str, content: str, needle: str
) -> None:
    config = tmp_path / name
    config.write_text(content)
    refusal = attempt(tmp_path, fake_fio, "pts", ["--config", str(config)],
                      size=not content.startswith("size"))
    line = check(refusal)
    assert line.startswith(f"Error: config {config}: ") and needle in line, line


def test_bad_config_bytes_are_refused(tmp_path: Path, fake_fio: Path) -> None:
    for content, needle in ((b"profile = '\xff'\n", "not UTF-8"),
                            (b"# " + b"x" * (1 << 20) + b"\n", "larger than 1024 KiB")):
        config = tmp_path / "run.toml"
        config.write_bytes(content)
        assert needle in check(attempt(tmp_path, fake_fio, "pts", ["--config", str(config)]))
    assert "not a regular file" in check(attempt(tmp_path, fake_fio, "pts",
                                                 ["--config", str(tmp_path)]))
