"""GPU: a second process runs the seed fusions without compiling anything."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys
import numpy as np
import torch
sys.path.insert(0, {root!r})
from tunefuse.compiler import STATS
from tunefuse.fusion_file import load_fusion_file
rng = np.random.default_rng(0)
sums = {{}}
for case in load_fusion_file({seeds!r}):
    fd = case.build()
    inputs = [torch.from_numpy(x).cuda() for x in case.example_inputs(rng)]
    outs = fd.execute(inputs)
    sums[case.name] = [float(o.double().sum()) for o in outs]
print(json.dumps({{"compiles": STATS.count, "sums": sums}}))
"""


def run_child(url: str) -> dict:
    code = CHILD.format(root=str(ROOT), seeds=str(ROOT / "examples" / "seed_fusions.py"))
    env = dict(os.environ, TUNEFUSE_CACHE_URL=url)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_runs_the_seeds_with_zero_nvrtc_compiles(tmp_path):
    url = f"sqlite:///{tmp_path / 'cache.sqlite'}"
    first = run_child(url)
    second = run_child(url)
    assert first["compiles"] > 0
    assert second["compiles"] == 0
    assert second["sums"] == first["sums"]
    from cache_db.store import CacheStore

    store = CacheStore.open(url)
    jobs = store.jobs()
    assert jobs and len({(j.kernel_key, j.shape_key) for j in jobs}) == len(jobs)  # never duplicated
    assert max(j.priority for j in jobs) >= 2  # the second process counted its hits
