"""The agent's wire protocol (run/agent_wire.py): every message an agent writes reads back
as its record on the coordinator's side, byte for byte, and an answer that is not its
record stops the run with one line naming the host (no ssh: a stand-in for the agent
prints what a host would)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ssdlab import __version__
from ssdlab.engine.startat import Mark
from ssdlab.errors import ExitCode
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan.results import HealthCount, HostTruth, PurgeStep, TruthAnswer
from ssdlab.run import agent
from ssdlab.run import agent_wire as wire
from ssdlab.run.hosts import remote_purge
from ssdlab.run.remote import RemoteHost, RemoteSet, Ssh, _last_json
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.remote_spec import RemoteTarget

INFO = TargetInfo("/dev/loop0", "block", "loop0", "emulated", "EMU", "S1", "1", 1 << 30,
                  512, 4096, False, None, "none", None, {"backing_file": "/tmp/x"})


def _check_answer() -> wire.CheckAnswer:
    hello = agent.hello("/nonexistent/fio")  # fio unusable: said, not raised
    return wire.CheckAnswer(agent._facts(INFO.to_dict()), hello.host or {},
                       {"ssdlab": __version__, "fio": "fio-3.33"}, hello)


#: every kind of message, as the agent builds it, with the verb it answers
MESSAGES: list[tuple[str, Record]] = [
    ("hello", agent.hello("/nonexistent/fio")),
    ("check", _check_answer()),
    ("purge", PurgeStep("blkdiscard", True, 0.25, ("blkdiscard", "/dev/loop0"), "")),
    ("purge", PurgeStep("recreate", False, 0, None, "could not")),
    ("truth", TruthAnswer({"waf": 1.5, "config": {"slc_bytes": 1 << 20}},
                               HealthCount("nvme smart-log", 1 << 30, 512000))),
    ("truth", TruthAnswer(None, None)),
    ("truth", TruthAnswer.partial(emulator=None, health_error="no health log")),
    ("control", wire.ControlAnswer("fault clear")),
    ("probe", wire.ProbeAnswer(None)),
    ("probe", wire.ProbeAnswer("/dev/loop0 does not read: EIO")),
    ("serve", wire.Ready(True, "/run/ssdlab-agent/1-ab/fio.sock", 4242, ("/dev/loop0",))),
    ("serve", wire.ErrorAnswer("refusing /dev/sdb: mounted at /srv", 3)),
    ("clock", wire.ClockAnswer(1795892395.523171)),
    ("starts", wire.StartsAnswer([Mark(0, 1795892395523171402, 1795892394523171402,
                                       1795892395530469152)])),
    ("starts", wire.StartsAnswer([])),
]


@pytest.mark.parametrize(("verb", "message"), MESSAGES)
def test_every_message_reads_back_as_its_record(verb: str, message: Record) -> None:
    line = json.dumps(message.to_json(), default=str)  # as the agent prints it
    answer = _last_json(f"ssh: a warning first\n{line}\n")
    assert answer is not None
    read = wire.decode("h1", verb, answer, type(message))
    assert read == message
    assert json.dumps(read.to_json()) == line


def test_a_request_reads_back_on_the_agents_side() -> None:
    request = wire.Request("purge", "/dev/loop0", method="blkdiscard", offset="0", size="4096")
    line = json.dumps(request.to_json())
    assert line == ('{"verb": "purge", "target": "/dev/loop0", "method": "blkdiscard", '
                    '"offset": "0", "size": "4096"}')
    assert wire.Request.from_json(json.loads(line)) == request
    assert json.dumps(wire.Request("probe", "/dev/loop0").to_json()) == (
        '{"verb": "probe", "target": "/dev/loop0"}')


def test_a_hosts_truth_is_stored_as_the_host_and_its_answer() -> None:
    answer = wire.decode("h1", "truth", {"emulator": None, "health_error": "no log"},
                         TruthAnswer)
    assert HostTruth("h1", answer).to_json() == {"host": "h1", "emulator": None,
                                                      "health_error": "no log"}


@pytest.mark.parametrize(("verb", "record", "answer", "why"), [
    ("probe", wire.ProbeAnswer, {"lost": 5}, "probe answer.lost"),
    ("purge", PurgeStep, {"method": "blkdiscard", "ok": True}, "missing seconds"),
    ("truth", TruthAnswer, {"emulator": [1, 2]}, "truth answer.emulator"),
    ("control", wire.ControlAnswer, {}, "missing done"),
    ("serve", wire.Ready, {"ready": "yes"}, "serve answer.ready"),
    ("check", wire.CheckAnswer, {"info": {}, "host": {}, "versions": {"fio": 3},
                            "hello": {"protocol": 1}}, "check answer.versions.fio"),
])
def test_a_malformed_answer_is_one_line_naming_the_host(
        verb: str, record: type[Record], answer: JsonObject, why: str) -> None:
    with pytest.raises(wire.HostError) as raised:
        wire.decode("h1", verb, answer, record)
    text = str(raised.value)
    assert text.startswith("host h1: a malformed answer (") and why in text
    assert "\n" not in text and raised.value.exit_code == ExitCode.TARGET


@dataclass(frozen=True)
class _Prints(Ssh):
    """An agent on every host that prints ``lines`` (what ``ssdlab agent VERB`` would)."""

    lines: tuple[str, ...] = ()

    def argv(self, host: str, remote: Sequence[str], *extra: str) -> list[str]:
        text = "\n".join(self.lines)
        return [sys.executable, "-c", f"print({text!r})"]


def _checked(*lines: str) -> RemoteSet:
    return RemoteSet.checked("h1:/dev/loop0", True, read_only=False,
                             ssh=_Prints(lines=lines))


def test_a_hosts_check_answer_is_decoded_once() -> None:
    line = json.dumps(_check_answer().to_json(), default=str)
    found = _checked("a banner", line)
    (host,) = found.hosts
    assert host.info == INFO and host.hello.protocol == wire.PROTOCOL
    assert host.hello.ssdlab == __version__ and host.hello.fio is not None
    record = found.host_records()[0]
    assert (record.host, record.path, record.target) == (
        "h1", "/dev/loop0", INFO.to_dict())


@pytest.mark.parametrize(("answer", "message"), [
    ({"hello": {"protocol": wire.PROTOCOL + 1}},
     f"host h1: its ssdlab agent speaks protocol {wire.PROTOCOL + 1}, this ssdlab speaks "
     f"{wire.PROTOCOL}: install the same ssdlab there"),
    ({"info": {}, "host": {}, "versions": {},
      "hello": {"protocol": wire.PROTOCOL, "time": "now"}},
     "host h1: a malformed answer (check answer.hello.time: expected a number, got text): "
     "is the same ssdlab installed there?"),
    ({"info": {"path": "/dev/loop0"}, "host": {}, "versions": {},
      "hello": {"protocol": wire.PROTOCOL}},
     "host h1: a malformed answer (check answer.info: "),
])
def test_a_check_answer_that_is_not_one_is_refused_in_one_line(
        answer: JsonObject, message: str) -> None:
    with pytest.raises(wire.HostError) as raised:
        _checked(json.dumps(answer))
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def _serving(tmp: Path, answers: Sequence[JsonObject]) -> RemoteSet:
    """A run connected to one host whose serving agent answers each request line with the
    next of ``answers`` and writes the requests it got to ``tmp``."""
    script = ("import sys, json\n"
              f"answers = {[json.dumps(a) for a in answers]!r}\n"
              f"with open({str(tmp)!r}, 'w') as log:\n"
              "    for answer in answers:\n"
              "        log.write(sys.stdin.readline()); log.flush()\n"
              "        print(answer, flush=True)\n")
    tunnel = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    target = RemoteTarget("h1", "/dev/loop0")
    found = RemoteSet((target,), Ssh(), True, False)
    found.hosts = [RemoteHost(target, INFO, agent.hello("/nonexistent/fio"), 0.0, tunnel)]
    return found


def _end(found: RemoteSet) -> None:
    for host in found.hosts:
        assert host.tunnel is not None
        host.tunnel.communicate(timeout=10)


def test_the_serving_connection_sends_requests_and_decodes_answers(tmp_path: Path) -> None:
    log = tmp_path / "requests"
    purged = PurgeStep("blkdiscard", True, 0, ("blkdiscard", "/dev/loop0"), "")
    found = _serving(log, [purged.to_json(), {"emulator": None, "health": None},
                           {"lost": None}])
    try:
        outcome = remote_purge(found, "auto", 0, 4096)
        assert (outcome.method, outcome.ok, outcome.seconds, outcome.detail) == (
            "blkdiscard", True, 0.0, "h1: ok ()")
        assert [t.to_json() for t in found.truth()] == [
            {"host": "h1", "emulator": None, "health": None}]
        assert found.lost() is None
    finally:
        _end(found)
    with open(log, encoding="utf-8") as sent:
        requests = [wire.Request.from_json(json.loads(line)) for line in sent]
    assert requests == [wire.Request("purge", "/dev/loop0", method="auto", offset="0",
                                     size="4096"),
                        wire.Request("truth", "/dev/loop0"),
                        wire.Request("probe", "/dev/loop0")]


def test_a_malformed_answer_on_the_serving_connection_is_one_line(tmp_path: Path) -> None:
    found = _serving(tmp_path / "requests", [{"lost": ["not", "text"]}])
    try:
        lost = found.lost()
    finally:
        _end(found)
    assert lost == ("host h1: a malformed answer (probe answer.lost: expected text, got an "
                    "array): is the same ssdlab installed there?")
