"""The commands hints tell the user to type: the command as it was started when ``ssdlab``
on PATH is not it (a new user runs ``.venv/bin/ssdlab``), and never a line a shell would
read as a pipe.

The black-box tests start the real console script of this virtual environment, by a
relative path as a new user would, with PATH holding it or not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssdlab.cli.main import invoked_as

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "ssdlab"  # the venv's console script


def _script(tmp_path: Path, name: str = "ssdlab") -> Path:
    path = tmp_path / "bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_name_alone_when_path_finds_this_very_command(tmp_path: Path) -> None:
    script = _script(tmp_path)
    assert invoked_as(str(script), path=str(script.parent)) == "ssdlab"
    assert invoked_as(str(script), path=f"/nonexistent:{script.parent}") == "ssdlab"


def test_the_path_it_was_started_by_when_path_does_not_find_it(tmp_path: Path) -> None:
    script = _script(tmp_path)
    assert invoked_as(str(script), path="/nonexistent") == str(script)
    assert invoked_as(".venv/bin/ssdlab", path="/nonexistent") == ".venv/bin/ssdlab"


def test_another_ssdlab_on_path_is_not_this_one(tmp_path: Path) -> None:
    ours, theirs = _script(tmp_path / "a"), _script(tmp_path / "b")
    assert invoked_as(str(ours), path=str(theirs.parent)) == str(ours)


def test_a_path_with_a_space_is_quoted_for_the_shell(tmp_path: Path) -> None:
    script = _script(tmp_path / "my lab")
    assert invoked_as(str(script), path="/nonexistent") == f"'{script}'"


def test_python_dash_m_names_the_script_beside_that_python(tmp_path: Path) -> None:
    python = _script(tmp_path, "python3")
    main = "/somewhere/site-packages/ssdlab/__main__.py"
    assert invoked_as(main, python=str(python), path="/nonexistent") == f"{python} -m ssdlab"
    script = _script(tmp_path)  # beside that python now
    assert invoked_as(main, python=str(python), path="/nonexistent") == str(script)
    assert invoked_as(main, python=str(python), path=str(script.parent)) == "ssdlab"


def _run(*args: str, path: str, store: Path) -> subprocess.CompletedProcess[str]:
    """The venv's ``ssdlab`` started as ``.venv/bin/ssdlab`` from the checkout."""
    relative = os.path.relpath(SCRIPT, ROOT)
    env = {**os.environ, "PATH": path, "SSDLAB_STORE": str(store)}
    return subprocess.run([relative, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture
def script() -> str:
    if not SCRIPT.is_file():
        pytest.skip(f"no console script at {SCRIPT} (not a virtual environment)")
    return os.path.relpath(SCRIPT, ROOT)


def test_hints_name_the_command_as_started_when_it_is_not_on_path(
        script: str, tmp_path: Path) -> None:
    system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    store = tmp_path / "none.sqlite"
    shown = _run("show", "last", path=system, store=store)
    assert shown.returncode == 5
    assert f"run `{script} run` or `{script} demo` first" in shown.stderr, shown.stderr
    bad = _run("run", "pts", "--no-such-option", path=system, store=store)
    assert bad.returncode == 2
    assert f"(see `{script} --help`)" in bad.stderr, bad.stderr
    missing = _run("run", "pts", "--target", path=system, store=store)
    assert f"(see `{script} run pts --help`)" in missing.stderr, missing.stderr
    on_path = _run("show", "last", path=f"{SCRIPT.parent}:{system}", store=store)
    assert "run `ssdlab run` or `ssdlab demo` first" in on_path.stderr, on_path.stderr
    assert not store.exists()


def test_python_dash_m_hints_name_the_venv_script(script: str, tmp_path: Path) -> None:
    system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env = {**os.environ, "PATH": system, "SSDLAB_STORE": str(tmp_path / "none.sqlite")}
    shown = subprocess.run([sys.executable, "-m", "ssdlab", "show", "last"], env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert f"run `{SCRIPT} run`" in shown.stderr, shown.stderr



def test_the_demo_says_what_to_do_next_one_command_a_line() -> None:
    """``next: A | B`` read as a shell pipe: each command is a line of its own now."""
    from ssdlab.cli.demo_cmd import next_steps
    lines = next_steps("20261122-053109-5e11")
    assert lines == ["next:", "  ssdlab show 20261122-053109-5e11",
                     "  ssdlab export 20261122-053109-5e11 --format csv"]
