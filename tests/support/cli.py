"""Run the real ``ssdlab`` command in a subprocess (black-box CLI tests)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path


def ssdlab(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ssdlab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The single ``Error: ...`` line a refused command must print, and nothing else."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
