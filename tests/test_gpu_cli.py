"""GPU: the CLI's tune and jobs enqueue on a fusion file."""

import json

import pytest
from test_frontend import ROOT
from typer.testing import CliRunner

from cli.main import app

pytestmark = pytest.mark.gpu


def test_tune_and_enqueue_a_fusion_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEFUSE_STUDIES", str(tmp_path))
    url = f"sqlite:///{tmp_path / 'c.sqlite'}"
    seeds = str(ROOT / "examples" / "seed_fusions.py")
    runner = CliRunner()
    result = runner.invoke(app, ["jobs", "enqueue", seeds, "--cache", url, "--json"])
    assert result.exit_code == 0, result.output
    queued = json.loads(result.output.strip().splitlines()[0])
    assert queued and any(q["new"] for q in queued)
    result = runner.invoke(
        app, ["tune", seeds, "--only", "reshape_2_10_40", "--trials", "4", "--cache", url, "--json"]
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output.strip().splitlines()[-1])
    assert row["stored"] and row["best_us"] <= row["default_us"]
    listed = json.loads(runner.invoke(app, ["cache", "ls", "--cache", url, "--json"]).output)
    assert len(listed) == 1
