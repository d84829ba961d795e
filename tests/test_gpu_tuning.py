"""GPU: tuning stores records whose kernels match the reference; a new process uses them."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for

from tunefuse import Cache, DataType, tune

pytestmark = pytest.mark.gpu
ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["softmax", "bias_gelu", "col_sum"])
def test_tuning_stores_a_checked_winner_used_by_a_new_process(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEFUSE_STUDIES", str(tmp_path))
    url = f"sqlite:///{tmp_path / 'cache.sqlite'}"
    fd = build(ZOO[name], DataType.Float)
    inputs = inputs_for(fd, 2048, 1024, np.random.default_rng(0))
    report = tune(fd, inputs, trials=12, cache=Cache(url), progress=False)
    (seg,) = report.segments
    assert seg.stored and seg.trials >= 1 and seg.best_us <= seg.default_us
    from cache_db.store import CacheStore

    store = CacheStore.open(url)
    (record,) = store.records()
    assert record.params == seg.params and record.median_us == seg.best_us
    code = (
        f"import sys, json, numpy as np; sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]\n"
        "from fusion_zoo import ZOO, build, inputs_for\n"
        "from tunefuse import DataType, reference\n"
        "from tunefuse.compiler import STATS\n"
        f"fd = build(ZOO[{name!r}], DataType.Float)\n"
        "xs = inputs_for(fd, 2048, 1024, np.random.default_rng(0))\n"
        "out = fd.execute(xs)[0]\n"
        "ok = np.allclose(out, reference.run(fd.fusion, xs)[0], rtol=1e-3, atol=1e-3)\n"
        "print(json.dumps({'compiles': STATS.count, 'ok': bool(ok)}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, TUNEFUSE_CACHE_URL=url),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer == {"compiles": 0, "ok": True}
    assert store.lookup(record.kernel_key, record.shape_key, record.env).hits >= 1


def test_each_kernel_is_measured_once(tmp_path, monkeypatch):
    """bias_gelu of [1, 1]: 360 valid points of the pointwise space and 60 kernels (a grid of
    one block whatever its block size's blocks an SM, one vector, ...). A study of more
    trials than kernels measures each kernel once and tells the rest their twin's time."""
    import itertools

    from tunefuse.codegen import code_identity, generate
    from tunefuse.runtime.device import runtime
    from tunefuse.schedulers import scheduler_for, with_values

    monkeypatch.setenv("TUNEFUSE_STUDIES", str(tmp_path))
    fd = build(ZOO["bias_gelu"], DataType.Float)
    inputs = inputs_for(fd, 1, 1, np.random.default_rng(0))
    device = runtime(0).info
    plan = fd.plan(inputs, device=device)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    (seg,) = plan.segments
    sched = scheduler_for(seg.scheduler)
    space, default = sched.search_space(seg, device), sched.default_params(seg, device)
    kernels = set()
    for combo in itertools.product(*[d.choices for d in space.values()]):
        p = with_values(default, dict(zip(space, combo)))
        if sched.is_valid(seg, device, p) is None:
            kernels.add(code_identity(generate(seg, p, device, dtypes)))
    trials = len(kernels) + 10
    cache = Cache(f"sqlite:///{tmp_path / 'cache.sqlite'}")
    report = tune(fd, inputs, trials=trials, patience=10 * trials, cache=cache, progress=False)
    (tuned,) = report.segments
    assert tuned.trials <= len(kernels)  # measured: each kernel once at most
    told = [h for h in tuned.history if h[2] == "COMPLETE"]
    assert len(told) > tuned.trials  # the points that shared a kernel were told its time
