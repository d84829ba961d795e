import json

from test_frontend import ROOT
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def test_explain_prints_each_plan():
    result = runner.invoke(
        app,
        ["explain", str(ROOT / "examples" / "seed_fusions.py"), "--only", "transpose_with_views"],
    )
    assert result.exit_code == 0, result.output
    assert "transpose" in result.output and "kernel_key" in result.output


def test_explain_json():
    result = runner.invoke(
        app,
        [
            "explain",
            str(ROOT / "examples" / "seed_fusions.py"),
            "--json",
            "--only",
            "reshape_2_10_40",
        ],
    )
    assert result.exit_code == 0, result.output
    (doc,) = json.loads(result.output)  # one document: a list, a fusion an item
    assert doc["num_kernels"] == 1 and doc["segments"][0]["scheduler"] == "pointwise"
    every = json.loads(run("explain", ROOT / "examples" / "seed_fusions.py", "--json").output)
    assert len(every) > 1 and all("conc_key" in d for d in every)


def test_explain_bad_file_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["explain", str(tmp_path / "missing.py")])
    assert result.exit_code == 2 and "does not exist" in result.output
    result = runner.invoke(
        app, ["explain", str(ROOT / "examples" / "seed_fusions.py"), "--only", "nope"]
    )
    assert result.exit_code == 2 and "no fusion named 'nope'" in result.output


LONG_ROW_SOFTMAX = """
from tunefuse import DataType, FusionDefinition
from tunefuse.fusion_file import FusionCase, randn


def softmax(fd: FusionDefinition) -> None:
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
    e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
    fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))


FUSIONS = [FusionCase("softmax", softmax, randn((2, 50257)))]
"""


def test_explain_plans_as_the_named_architecture(tmp_path):
    """Two GPT-2 vocabulary rows of floats (201 KB each): an H100 block stages one in its 227
    KB of shared memory (one kernel); an A100 block has 163 KB, so the A100 runs a kernel a
    pass. An architecture without a profile is refused by name."""
    path = tmp_path / "softmax.py"
    path.write_text(LONG_ROW_SOFTMAX)

    def kernels(*arch: str) -> list[str]:
        result = runner.invoke(app, ["explain", str(path), "--json", *arch])
        assert result.exit_code == 0, result.output
        return [s["scheduler"] for s in json.loads(result.output)[0]["segments"]]

    assert kernels() == kernels("--arch", "sm_90") == ["normalization"]
    assert kernels("--arch", "sm_80") == ["reduction", "pointwise"]  # max and sum in one pass
    _one_line_error(run("explain", path, "--arch", "sm_75"), 2, "sm_75", "sm_80, sm_90")


COLUMN_SUMS = """
from tunefuse import DataType, FusionDefinition
from tunefuse.fusion_file import FusionCase, randn


def col_sum(fd: FusionDefinition) -> None:
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
    fd.add_output(fd.ops.sum(x, dims=[0]))


FUSIONS = [
    FusionCase("wide", col_sum, randn((8192, 4096))),
    FusionCase("narrow", col_sum, randn((32768, 1024))),
]
"""


def test_explain_shows_the_default_launch_of_each_kernel_on_the_named_architecture(tmp_path):
    """With --arch, each kernel's default params and launch geometry on that GPU: on an H100
    the 4096 column sums are not split (their rows fill 48% of its threads), the 1024 ones
    are, across blocks (grid y) through a workspace. Without --arch there is no device to
    choose for, and none is shown."""
    path = tmp_path / "columns.py"
    path.write_text(COLUMN_SUMS)
    documents = json.loads(run("explain", path, "--json", "--arch", "sm_90").output)
    (wide,), (narrow,) = (d["segments"] for d in documents)
    assert wide["defaults"]["params"]["split"] == 1 and wide["defaults"]["workspace_bytes"] == 0
    split = narrow["defaults"]["params"]["split"]
    assert split > 1 and narrow["defaults"]["grid"][1] == split
    assert narrow["defaults"]["workspace_bytes"] > 0
    text = run("explain", path, "--arch", "sm_90").output
    assert "defaults on NVIDIA H100" in text and f"split={split}" in text
    plain = json.loads(run("explain", path, "--json").output)
    assert all("defaults" not in s for d in plain for s in d["segments"])
    assert "defaults on" not in run("explain", path).output


# -- cache and jobs, against a real SQLite cache filled through the library ---------------

import datetime as dt  # noqa: E402

import pytest  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from test_cache_store import ENV, OTHER_ENV, fusion_row, put_real, record  # noqa: E402

from cache_db.models import BinaryRow, RecordRow  # noqa: E402
from cache_db.store import CacheStore  # noqa: E402


@pytest.fixture
def filled(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    store = CacheStore.open(url)
    fid = fusion_row(store)
    for k, env in enumerate([ENV, ENV, OTHER_ENV]):
        put_real(store, shape=str(k), value=k, env=env, fusion_id=fid)
    with store.engine.begin() as c:
        c.execute(
            sa.update(RecordRow)
            .where(RecordRow.shape_key == "0")
            .values(tuned_at=dt.datetime(2020, 1, 1))
        )
    store.enqueue(fid, 0, "q" * 64, "8x8", ENV, "[]")
    return url, store


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    return result


def test_cache_ls_show_stats_json(filled):
    url, _ = filled
    listed = json.loads(run("cache", "ls", "--cache", url, "--json").output)
    assert len(listed) == 3 and {r["shape_key"] for r in listed} == {"0", "1", "2"}
    one = json.loads(run("cache", "show", listed[0]["id"], "--cache", url, "--json").output)
    assert one["params"]["block_size"] == 256 and one["speedup"] == pytest.approx(1.2)
    stats = json.loads(run("cache", "stats", "--cache", url, "--json").output)
    assert stats["records"] == 3 and stats["binaries"] == 3 and stats["jobs"] == {"queued": 1}
    assert run("cache", "show", 999, "--cache", url).exit_code == 1
    assert run("cache", "ls", "--cache", url, "--sort", "nonsense").exit_code == 2
    assert "kernel" in run("cache", "ls", "--cache", url).output


def test_prune_dry_run_deletes_nothing_and_yes_deletes_exactly_that(filled):
    url, store = filled
    dry = run("cache", "prune", "--cache", url, "--older-than", "30", "--dry-run", "--json")
    assert dry.exit_code == 0
    planned = json.loads(dry.output)
    assert [r["shape_key"] for r in planned["records"]] == ["0"] and len(store.records()) == 3
    done = run("cache", "prune", "--cache", url, "--older-than", "30", "--yes", "--json")
    assert json.loads(done.output) == planned
    assert sorted(r.shape_key for r in store.records()) == ["1", "2"]
    assert run("cache", "prune", "--cache", url).exit_code == 2  # nothing said: refused


@pytest.mark.parametrize(
    "args",
    [
        ("--older-than", "-5"),
        ("--unused-for", "-1"),
        ("--max-bytes", "-1"),
        ("--older-than", "nan"),
        ("--older-than", "inf"),
        ("--unused-for", "1e300"),
    ],
)
def test_prune_refuses_nonsense_before_touching_anything(filled, args):
    url, store = filled
    for extra in ((), ("--dry-run",)):
        result = run("cache", "prune", "--cache", url, *args, "--yes", *extra)
        assert result.exit_code == 2, result.output
        assert args[0] in result.output and "Traceback" not in result.output
    assert len(store.records()) == 3 and store.stats().binaries == 3


def test_export_import_and_a_tampered_import_refused(filled, tmp_path):
    url, _ = filled
    path = tmp_path / "export.jsonl"
    assert run("cache", "export", path, "--cache", url).exit_code == 0
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    assert json.loads(run("cache", "import", path, "--cache", other, "--json").output)["items"] == 7
    lines = path.read_text().splitlines()
    doc = json.loads(lines[2])
    doc["cubin"] = doc["cubin"][::-1]
    lines[2] = json.dumps(doc)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    third = f"sqlite:///{tmp_path / 'third.sqlite'}"
    result = run("cache", "import", bad, "--cache", third)
    assert result.exit_code == 1 and "import refused" in result.output
    assert CacheStore.open(third).stats().records == 0


def test_verify_catches_a_corrupted_binary(filled):
    url, store = filled
    assert run("cache", "verify", "--cache", url).exit_code == 0
    with store.engine.begin() as c:
        c.execute(sa.update(BinaryRow).values(cubin=b"evil"))
    result = run("cache", "verify", "--cache", url, "--json")
    assert result.exit_code == 1 and len(json.loads(result.output)["quarantined"]) == 3
    assert run("cache", "vacuum", "--cache", url).exit_code == 0


def test_jobs_ls_show_retry_cancel(filled):
    url, store = filled
    (job,) = json.loads(run("jobs", "ls", "--cache", url, "--json").output)
    assert job["state"] == "queued"
    assert run("jobs", "cancel", job["id"], "--cache", url).exit_code == 0
    assert (
        json.loads(run("jobs", "show", job["id"], "--cache", url, "--json").output)["state"]
        == "cancelled"
    )
    assert run("jobs", "retry", job["id"], "--cache", url).exit_code == 0
    assert store.jobs()[0].state == "queued"
    again = run("jobs", "retry", job["id"], "--cache", url)
    assert again.exit_code == 1 and "already queued" in again.output
    assert run("jobs", "show", 12345, "--cache", url).exit_code == 1
    bogus = run("jobs", "ls", "--cache", url, "--state", "bogus")
    assert bogus.exit_code == 2 and "--state must be one of" in bogus.output


def test_doctor_reports_the_cache(filled):
    url, _ = filled
    result = run("doctor", "--cache", url, "--quick")
    assert "cache" in result.output and "revision 0004" in result.output
    assert (
        "1 queued tuning jobs wait for `tunefuse daemon`" in result.output
    )  # a note, not a failure
    assert "FAIL daemon" not in result.output


def test_doctor_tells_live_stopped_and_silent_daemon_workers(filled):
    from cache_db import queue
    from cache_db.models import WorkerRow

    url, store = filled
    queue.report_worker(store, "gpu-host:10:0", "gpu-host", 10, 0, "busy", job_id=3, jobs_done=4)
    queue.report_worker(store, "gpu-host:11:1", "gpu-host", 11, 1, "stopped", jobs_done=9)
    result = run(
        "doctor", "--cache", url, "--quick"
    )  # (no driver on a CPU machine: exit 1 for that)
    assert "FAIL daemon worker" not in result.output
    assert "ok   daemon worker: gpu-host:10:0 (GPU 0), 4 jobs done: tuning job 3" in result.output
    assert "gpu-host:11:1 (GPU 1), 9 jobs done: stopped" in result.output
    import socket

    here = socket.gethostname()
    queue.report_worker(store, f"{here}:12:0", here, 12, 0, "busy", job_id=5, jobs_done=1)
    hour_ago = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(hours=1)
    with store.engine.begin() as c:  # both busy workers went silent an hour ago
        c.execute(
            sa.update(WorkerRow).where(WorkerRow.state == "busy").values(last_seen_at=hour_ago)
        )
    result = run("doctor", "--cache", url, "--quick")
    assert result.exit_code == 1
    assert (
        f"FAIL daemon worker: {here}:12:0" in result.output
        and f"restart `tunefuse daemon` on {here}" in result.output
    )
    # The health check judges its own host: another host's silent worker is a note.
    assert (
        "FAIL daemon worker: gpu-host:10:0" not in result.output
        and "not this host" in result.output
    )
    with store.engine.begin() as c:  # three days on: gone for good, not a failure forever
        c.execute(sa.update(WorkerRow).values(last_seen_at=hour_ago - dt.timedelta(days=3)))
    result = run("doctor", "--cache", url, "--quick")
    assert "FAIL daemon worker" not in result.output and "forgotten" in result.output
    assert (
        queue.forget_workers(store) == 3 and queue.workers(store) == []
    )  # what a daemon's start does


def test_cache_show_prints_source_and_history_and_plots_them(filled, tmp_path):
    from test_cache_store import HISTORY

    url, store = filled
    fid = fusion_row(store)
    rec, cubin = record(shape="77", cubin=b"plotted" * 9, fusion_id=fid, history=HISTORY)
    store.put_record(
        rec, cubin, "sm_90", "13.5", source='extern "C" __global__ void tf_pointwise_x() {}'
    )
    rid = store.lookup(rec.kernel_key, "77", ENV).id
    doc = json.loads(run("cache", "show", rid, "--cache", url, "--json").output)
    assert doc["source"].startswith('extern "C"') and doc["history"] == [list(h) for h in HISTORY]
    text = run("cache", "show", rid, "--cache", url).output
    assert "__global__ void tf_pointwise_x" in text and "3 trials, 1 failed, best 10.0 µs" in text
    png = tmp_path / "history.png"
    result = run("cache", "show", rid, "--cache", url, "--plot", png)
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    bare, bare_cubin = record(shape="78", cubin=b"bare" * 9)  # stored without history or source
    store.put_record(bare, bare_cubin, "sm_90", "13.5")
    plain = store.lookup(bare.kernel_key, "78", ENV).id
    no_history = run("cache", "show", plain, "--cache", url, "--plot", tmp_path / "none.png")
    assert no_history.exit_code == 1 and "no tuning history" in no_history.output
    assert "source: not kept" in run("cache", "show", plain, "--cache", url).output


def test_jobs_enqueue_without_a_gpu_says_why(tmp_path):
    result = run(
        "jobs",
        "enqueue",
        ROOT / "examples" / "seed_fusions.py",
        "--cache",
        f"sqlite:///{tmp_path / 'q.sqlite'}",
    )
    from tunefuse.runtime.device import device_count

    if device_count():
        assert result.exit_code == 0
    else:
        assert result.exit_code == 2 and "not usable here" in result.output


# -- no tracebacks: every failure is one line that names it --------------------------------

BROKEN_SYNTAX = "def broken(:\n    pass\n"
BAD_SHAPE = """
from tunefuse import FusionDefinition, DataType
from tunefuse.fusion_file import FusionCase


def define(fd):
    x = fd.define_tensor(shape=[2, 3], dtype=DataType.Float)
    fd.add_output(fd.ops.reshape(x, new_shape=[7]))


FUSIONS = [FusionCase("bad_reshape", define, lambda rng: [])]
"""


def _one_line_error(result, code: int, *words: str) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output, result.output
    assert "error:" in result.output and all(w in result.output for w in words), result.output


def test_a_fusion_file_with_a_syntax_error_or_a_bad_definition_is_one_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN_SYNTAX)
    _one_line_error(run("explain", broken), 2, "broken.py:1", "invalid syntax")
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_SHAPE)
    _one_line_error(run("explain", bad), 1, "bad_reshape")
    _one_line_error(run("tune", bad, "--cache", f"sqlite:///{tmp_path / 'c.sqlite'}"), 1)


def test_tune_and_daemon_without_a_gpu_fail_in_one_line(tmp_path):
    from conftest import gpu_available

    if gpu_available():
        pytest.skip("this machine has a GPU")
    url = f"sqlite:///{tmp_path / 'c.sqlite'}"
    seeds = ROOT / "examples" / "seed_fusions.py"
    _one_line_error(run("tune", seeds, "--only", "reshape_2_10_40", "--cache", url), 1, "CUDA")
    _one_line_error(run("daemon", "--cache", url, "--idle-exit", "1"), 1, "no usable CUDA GPU")
    _one_line_error(
        run("daemon", "--cache", url, "--devices", "0", "--idle-exit", "1"), 1, "no usable CUDA GPU"
    )


def test_import_of_bytes_that_are_not_an_export_is_one_line(filled, tmp_path):
    url, store = filled
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe\x00\x01 not text")
    _one_line_error(run("cache", "import", bad, "--cache", url), 1, "not UTF-8")
    bad.write_text('{"format": "tunefuse.cache.v1"}\n' + "[" * 50_000 + "]" * 50_000 + "\n")
    _one_line_error(run("cache", "import", bad, "--cache", url), 1, "import refused")
    assert len(store.records()) == 3


def test_verbose_shows_the_traceback(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_SHAPE)
    quiet = run("tune", bad, "--cache", f"sqlite:///{tmp_path / 'c.sqlite'}")
    assert quiet.exit_code == 1 and "Traceback" not in quiet.output and "--verbose" in quiet.output
    loud = run("--verbose", "tune", bad, "--cache", f"sqlite:///{tmp_path / 'c.sqlite'}")
    assert loud.exit_code == 1 and "Traceback" in loud.output and "cannot reshape" in loud.output


# -- --json: one document on stdout, whatever happens ---------------------------------------


def _json_error(result, code: int, *words: str) -> dict:
    assert result.exit_code == code, result.output
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == code and all(w in doc["error"] for w in words), doc
    return doc


def test_json_errors_are_json(filled, tmp_path):
    url, _ = filled
    _json_error(run("cache", "ls", "--cache", url, "--sort", "bogus", "--json"), 2, "--sort")
    _json_error(run("jobs", "ls", "--cache", url, "--state", "bogus", "--json"), 2, "--state")
    _json_error(run("cache", "show", 999, "--cache", url, "--json"), 1, "no record 999")
    _json_error(
        run("cache", "prune", "--cache", url, "--older-than", "-5", "--json"), 2, "--older-than"
    )
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_SHAPE)
    _json_error(run("explain", bad, "--json"), 1, "bad_reshape")
    not_export = tmp_path / "x.jsonl"
    not_export.write_bytes(b"\xff")
    _json_error(run("cache", "import", not_export, "--cache", url, "--json"), 1, "not UTF-8")


def test_json_usage_errors_from_the_parser_are_json(filled, capsys, monkeypatch):
    """An unknown option or a bad number is found by Typer before the command runs: under
    --json that too is one JSON document (through the console script's main)."""
    import sys

    from cli.main import main

    url, _ = filled
    for args in (
        ["cache", "ls", "--cache", url, "--json", "--bogus"],
        ["cache", "prune", "--cache", url, "--json", "--older-than", "soon"],
    ):
        monkeypatch.setattr(sys, "argv", ["tunefuse", *args])
        with pytest.raises(SystemExit) as exit_:
            main()
        assert exit_.value.code == 2
        doc = json.loads(capsys.readouterr().out)
        assert doc["exit_code"] == 2 and doc["error"]
    monkeypatch.setattr(sys, "argv", ["tunefuse", "cache", "stats", "--cache", url, "--json"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 0 and json.loads(capsys.readouterr().out)["records"] == 3


def test_export_json_counts_items_and_lines(tmp_path):
    empty = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    path = tmp_path / "e.jsonl"
    doc = json.loads(run("cache", "export", path, "--cache", empty, "--json").output)
    assert doc["items"] == 0 and doc["lines"] == len(path.read_text().splitlines()) == 1


def test_doctor_json_is_one_document(filled):
    url, _ = filled
    result = run("doctor", "--cache", url, "--quick", "--json")
    doc = json.loads(result.stdout)
    assert {c["check"] for c in doc["checks"]} >= {"driver", "cache"}
    assert doc["ok"] == (result.exit_code == 0)
    (cache_check,) = [c for c in doc["checks"] if c["check"] == "cache"]
    assert cache_check["status"] == "ok" and "revision 0004" in cache_check["detail"]


def test_cache_ls_marks_quarantined_binaries(filled):
    url, store = filled
    listed = json.loads(run("cache", "ls", "--cache", url, "--json").output)
    assert {r["binary"] for r in listed} == {"ok"}
    store.quarantine_binary(listed[0]["code_key"])
    listed = {r["id"]: r for r in json.loads(run("cache", "ls", "--cache", url, "--json").output)}
    assert [r["binary"] for r in listed.values()].count("quarantined") == 1
    # Wide enough to show every column: the console's own width, not COLUMNS, which it reads
    # when it is made (an xdist worker's was set before this test ran).
    from cli.common import console

    saved = console._width
    console.width = 200
    try:
        wide = runner.invoke(app, ["cache", "ls", "--cache", url])
    finally:
        console._width = saved
    assert "binary quarantined" in wide.output


# -- a cache this process cannot write ------------------------------------------------------


def test_a_read_only_cache_is_read_and_writes_are_refused_by_name(filled, monkeypatch):
    """Opened read-only (here: as if the file were not writable; root ignores permissions),
    the reading commands work and the writing ones say why they cannot, leaving it as it was."""
    import cache_db.store as store_module

    url, store = filled
    monkeypatch.setattr(store_module, "cannot_write", lambda path: True)
    assert len(json.loads(run("cache", "ls", "--cache", url, "--json").output)) == 3
    assert json.loads(run("cache", "stats", "--cache", url, "--json").output)["records"] == 3
    assert "read-only here" in run("doctor", "--cache", url, "--quick").output
    _one_line_error(
        run("cache", "prune", "--cache", url, "--older-than", "0", "--yes"), 1, "read-only"
    )
    _one_line_error(run("cache", "vacuum", "--cache", url), 1, "read-only")
    (job,) = json.loads(run("jobs", "ls", "--cache", url, "--json").output)
    _one_line_error(run("jobs", "cancel", job["id"], "--cache", url), 1, "read-only")
    monkeypatch.undo()
    assert len(store.records()) == 3 and store.jobs()[0].state == "queued"


def test_a_write_waiting_on_another_process_says_so(filled, tmp_path):
    """Another process holds SQLite's write lock for a few seconds: prune says what it waits
    for, then goes on when the lock is free."""
    import subprocess
    import sys
    import time

    url, store = filled
    path = url[len("sqlite:///") :]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time\n"
                f"c = sqlite3.connect({path!r}, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(3); c.execute('COMMIT')\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        result = run("cache", "prune", "--cache", url, "--older-than", "30", "--yes")
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert result.exit_code == 0, result.output
    assert (
        "waiting for the write lock on" in result.output
        and "another process holds it" in result.output
    )
    assert waited >= 1.5 and sorted(r.shape_key for r in store.records()) == ["1", "2"]
