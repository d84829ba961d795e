"""The daemon as real processes against a real SQLite file and the real PostgreSQL server.
The tuning step of a job is a test runner that compiles the kernel with NVRTC (no GPU)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from daemon_runners import ENV
from postgres import own_database, postgres_available

from cache_db import queue
from cache_db.store import CacheStore
from tunefuse import DataType, FusionDefinition

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        u = f"sqlite:///{tmp_path / 'queue.sqlite'}"
        CacheStore.open(u).close()
        yield u
        return
    if not postgres_available():
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    with own_database() as u:
        CacheStore.open(u).close()
        yield u


def enqueue(url: str, n: int) -> None:
    store = CacheStore.open(url)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.relu(fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)))
    store.put_fusion(fd.fusion.fusion_id, fd.fusion.to_json(), "relu")
    for i in range(n):
        signature = json.dumps(
            [{"kind": "tensor", "dtype": "float", "shape": [i + 1, 8], "strides": [8, 1]}]
        )
        assert store.enqueue(fd.fusion.fusion_id, 0, "k" * 64, f"{i + 1}x8", ENV, signature)
    store.close()


def daemon(url: str, runner: str, tmp_path, *extra: str, **env: str) -> subprocess.Popen:
    environment = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
        DAEMON_TEST_LOG=str(tmp_path / "done.log"),
        **env,
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "daemon",
            "--cache",
            url,
            "--runner",
            f"daemon_runners:{runner}",
            *extra,
        ],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_four_daemons_drain_200_jobs_each_done_exactly_once(url, tmp_path):
    enqueue(url, 200)
    procs = [
        daemon(
            url, "compile_runner", tmp_path, "--idle-exit", "3", "--lease", "30", "--heartbeat", "1"
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs[0][-2000:]
    store = CacheStore.open(url)
    jobs = store.jobs()
    assert len(jobs) == 200 and {j.state for j in jobs} == {"done"}
    assert all(j.attempts == 1 for j in jobs)
    assert len(store.records()) == 200
    done = (tmp_path / "done.log").read_text().split("\n")
    ids = [line.split()[0] for line in done if line]
    assert len(ids) == 200 and len(set(ids)) == 200  # no job ran twice
    assert len({line.split()[1] for line in done if line}) > 1  # the work was shared
    every = [line for out in outputs for line in out.splitlines() if line.strip()]
    assert all(line.startswith("{") for line in every), [x for x in every if not x.startswith("{")][
        :3
    ]
    lines = [json.loads(line) for line in every]  # the log is machine-readable: JSON lines only
    assert sum(1 for e in lines if e["event"] == "done") == 200
    workers = queue.workers(store)  # each reported itself, and stopped cleanly
    assert len(workers) == 4 and {w.state for w in workers} == {"stopped"}
    assert sum(w.jobs_done for w in workers) == 200
    assert all({"job", "kernel", "outcome"} <= set(e) for e in lines if e["event"] == "done")


def test_a_killed_daemons_job_is_finished_by_another_after_the_lease(url, tmp_path):
    enqueue(url, 1)
    store = CacheStore.open(url)
    first = daemon(
        url, "slow_runner", tmp_path, "--lease", "3", "--heartbeat", "0.5", DAEMON_TEST_SECONDS="60"
    )
    wait_for(lambda: store.jobs()[0].state == "running")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    second = daemon(
        url, "compile_runner", tmp_path, "--lease", "3", "--heartbeat", "0.5", "--idle-exit", "10"
    )
    second.communicate(timeout=120)
    assert second.returncode == 0
    (job,) = store.jobs()
    assert job.state == "done" and job.attempts == 2
    assert len(store.records()) == 1


def test_sigterm_releases_the_job_and_exits_zero(url, tmp_path):
    enqueue(url, 1)
    store = CacheStore.open(url)
    proc = daemon(url, "slow_runner", tmp_path, "--lease", "30", DAEMON_TEST_SECONDS="60")
    wait_for(lambda: store.jobs()[0].state == "running")
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0 and time.monotonic() - start < 20
    (job,) = store.jobs()
    assert job.state == "queued" and job.lease_owner is None and job.attempts == 0
    assert '"event": "released"' in out


def test_a_failing_job_is_retried_with_backoff_then_failed(url, tmp_path):
    enqueue(url, 1)
    proc = daemon(
        url,
        "failing_runner",
        tmp_path,
        "--max-attempts",
        "2",
        "--backoff",
        "0.2",
        "--idle-exit",
        "3",
    )
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    (job,) = CacheStore.open(url).jobs()
    assert job.state == "failed" and job.attempts == 2 and "cannot be tuned" in job.error
