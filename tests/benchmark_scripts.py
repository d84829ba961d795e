"""A script of `benchmarks/` run as its users run it, in a process of its own: what the tests
of the GPU-free benchmark tools check (their output and the errors they refuse with)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *argv: str) -> subprocess.CompletedProcess:
    """`python3 benchmarks/<script> argv...` from the repository root; not checked."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *argv],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
