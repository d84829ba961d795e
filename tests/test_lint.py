"""ruff, as CI's gate on the code's form: `ruff check` (pycodestyle, pyflakes, import order)
and `ruff format --check` (STYLE.md's 100 columns), with the settings in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys

from test_frontend import ROOT

CODE = ["tunefuse", "cache_db", "cli", "tests", "benchmarks", "examples"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *CODE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_ruff_check_passes():
    done = _ruff("check", "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_the_code_as_it_is():
    done = _ruff("format", "--check", "--no-cache")
    assert done.returncode == 0, "run `ruff format`:\n" + done.stdout + done.stderr
