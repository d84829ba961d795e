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
restored = 0
for case in load_fusion_file({seeds!r}):
    fd = case.build()
    inputs = [torch.from_numpy(x).cuda() for x in case.example_inputs(rng)]
    outs = fd.execute(inputs)
    sums[case.name] = [float(o.double().sum()) for o in outs]
    restored += fd._runner.restored
print(json.dumps({{"compiles": STATS.count, "sums": sums, "restored": restored}}))
"""


def run_child(url: str) -> dict:
    code = CHILD.format(root=str(ROOT), seeds=str(ROOT / "examples" / "seed_fusions.py"))
    env = dict(os.environ, TUNEFUSE_CACHE_URL=url)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_runs_the_seeds_with_zero_nvrtc_compiles(tmp_path):
    url = f"sqlite:///{tmp_path / 'cache.sqlite'}"
    first = run_child(url)
    second = run_child(url)
    assert first["compiles"] > 0
    assert second["compiles"] == 0
    assert second["sums"] == first["sums"]
    assert first["restored"] == 0 and second["restored"] == len(
        first["sums"]
    )  # no planning, no codegen
    from cache_db.store import CacheStore

    store = CacheStore.open(url)
    jobs = store.jobs()
    assert jobs and len({(j.kernel_key, j.shape_key) for j in jobs}) == len(
        jobs
    )  # never duplicated
    assert max(j.priority for j in jobs) >= 2  # the second process counted its hits


def test_a_kept_launch_plan_gives_way_to_a_tuned_record(tmp_path):
    """A plan kept while a kernel ran on default params is re-planned once that kernel has a
    tuned record, and the new plan (using the record) is kept in its place."""
    import sqlalchemy as sa

    from cache_db.models import LaunchPlanRow
    from cache_db.store import CacheStore, TunedRecord
    from tunefuse.runtime.device import runtime

    url = f"sqlite:///{tmp_path / 'cache.sqlite'}"
    first = run_child(url)
    cases = len(first["sums"])
    store = CacheStore.open(url)
    with store.session() as s:
        rows = list(s.execute(sa.select(LaunchPlanRow)).scalars())
    assert rows
    row = rows[0]
    kernel = json.loads(row.plan_json)["kernels"][0]
    assert kernel["chosen"] == "default"
    store.put_record(
        TunedRecord(
            kernel["kernel_key"],
            kernel["shape_key"],
            runtime(0).env,
            kernel["scheduler"],
            kernel["params"],
            kernel["code_key"],
            kernel["kernel_name"],
            median_us=1.0,
            fusion_id=row.fusion_id,
        )
    )
    ran_it = sum(
        1
        for r in rows
        for k in json.loads(r.plan_json)["kernels"]
        if (k["kernel_key"], k["shape_key"]) == (kernel["kernel_key"], kernel["shape_key"])
    )
    third = run_child(url)
    assert third["compiles"] == 0 and third["sums"] == first["sums"]
    assert third["restored"] == cases - ran_it  # the plans running that kernel are made again
    again = json.loads(store.get_launch_plan(row.plan_key))["kernels"][0]
    assert again["chosen"] == "record" and again["kernel_key"] == kernel["kernel_key"]
    assert run_child(url)["restored"] == cases
    assert store.lookup(kernel["kernel_key"], kernel["shape_key"], runtime(0).env).hits >= 2
