"""GPU: the daemon tunes the queued seed fusions end to end with the real runner."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
ROOT = pathlib.Path(__file__).resolve().parents[1]

QUEUE = r"""
import sys, numpy as np, torch
sys.path.insert(0, {root!r})
from tunefuse.fusion_file import load_fusion_file
rng = np.random.default_rng(0)
for case in load_fusion_file({seeds!r}):
    fd = case.build()
    fd.execute([torch.from_numpy(x).cuda() for x in case.example_inputs(rng)])
"""


def queue_seed_jobs(tmp_path):  # noqa: ANN001, ANN201
    """Run the seed fusions once in a fresh process against a new SQLite cache, which queues a
    tuning job per kernel; returns (url, the environment a daemon needs, the store)."""
    from cache_db.store import CacheStore

    url = f"sqlite:///{tmp_path / 'cache.sqlite'}"
    env = dict(
        os.environ,
        TUNEFUSE_CACHE_URL=url,
        TUNEFUSE_STUDIES=str(tmp_path),
        PYTHONPATH=os.pathsep.join(
            [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
        ),
    )
    code = QUEUE.format(root=str(ROOT), seeds=str(ROOT / "examples" / "seed_fusions.py"))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=600)
    store = CacheStore.open(url)
    queued = store.jobs()
    assert queued and all(j.state == "queued" for j in queued)
    return url, env, store


def drain_with_daemon(env: dict, store, devices: str, trials: int):  # noqa: ANN001, ANN201
    """Run `tunefuse daemon` on `devices` until the queue is idle; check it exited 0 and
    left every job done. Returns (jobs, its JSON log events)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "daemon",
            "--devices",
            devices,
            "--trials",
            str(trials),
            "--idle-exit",
            "5",
            "--job-timeout",
            "120",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    jobs = store.jobs()
    assert {j.state for j in jobs} == {"done"}, [(j.state, j.error) for j in jobs]
    events = [
        json.loads(line) for line in (out.stdout + out.stderr).splitlines() if line.startswith("{")
    ]
    return jobs, events


def test_daemon_tunes_the_queued_seed_fusions(tmp_path):
    _, env, store = queue_seed_jobs(tmp_path)
    jobs, events = drain_with_daemon(env, store, "0", 6)
    assert len(store.records()) == len(jobs)
    assert sum(e["event"] == "done" for e in events) == len(jobs)
