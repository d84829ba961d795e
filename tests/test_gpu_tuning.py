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
