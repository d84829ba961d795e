import json

from typer.testing import CliRunner

from cli.main import app
from test_frontend import ROOT

runner = CliRunner()


def test_explain_prints_each_plan():
    result = runner.invoke(app, ["explain", str(ROOT / "examples" / "seed_fusions.py"), "--only", "transpose_with_views"])
    assert result.exit_code == 0, result.output
    assert "transpose" in result.output and "kernel_key" in result.output


def test_explain_json():
    result = runner.invoke(app, ["explain", str(ROOT / "examples" / "seed_fusions.py"), "--json",
                                 "--only", "reshape_2_10_40"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output.strip().splitlines()[-1])
    assert doc["num_kernels"] == 1 and doc["segments"][0]["scheduler"] == "pointwise"


def test_explain_bad_file_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["explain", str(tmp_path / "missing.py")])
    assert result.exit_code == 2 and "does not exist" in result.output
    result = runner.invoke(app, ["explain", str(ROOT / "examples" / "seed_fusions.py"), "--only", "nope"])
    assert result.exit_code == 2 and "no fusion named 'nope'" in result.output
