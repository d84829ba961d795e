"""First-call latency of a fusion in a fresh process: cold (NVRTC) against warm (cache).

    python3 benchmarks/first_call.py            # JSON: median cold_ms, warm_ms (3 of each), compiles
    python3 benchmarks/first_call.py --profile  # and a cProfile of the warm call (stderr)
    python3 benchmarks/first_call.py --profile-out=FILE  # and its pstats dump in FILE
As a child: python3 benchmarks/first_call.py --child  (TUNEFUSE_CACHE_URL set by the parent)

Both children run with .pyc files for every module, compiled before either starts (as an
installed package has them): Python compiling sources is not part of a first call, and
must not fall on one side only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def child() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    import sqlite3  # noqa: F401 - the driver SQLAlchemy imports at the first connect

    import alembic.command  # noqa: F401
    import cuda.core  # noqa: F401
    import sqlalchemy.dialects.sqlite  # noqa: F401
    import torch
    import torch.nn.functional  # noqa: F401 - module imports are process start-up, not the call
    from fusion_zoo import ZOO, build

    import cache_db.store  # noqa: F401
    import tunefuse.ir.serialize  # noqa: F401 - imported by the first fusion_id
    import tunefuse.runtime.executor  # noqa: F401 - imported lazily by the first execute
    from tunefuse import DataType
    from tunefuse.compiler import STATS

    cases = [
        build(ZOO[n], DataType.Float) for n in ("softmax", "layernorm", "bias_gelu", "row_sum")
    ]
    inputs = [
        [
            torch.randn(1024, 1024, device="cuda")
            if fd.fusion.values[v].rank == 2
            else torch.randn(1024, device="cuda")
            for v in fd.fusion.inputs
        ]
        for fd in cases
    ]
    torch.cuda.current_stream()
    torch.cuda.synchronize()
    profiler = None
    if "--profile" in sys.argv:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    modules_before = set(sys.modules)
    start = time.perf_counter()
    for fd, xs in zip(cases, inputs):
        fd.execute(xs)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        dump = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--profile-out=")), None)
        if dump:
            profiler.dump_stats(dump)
        print(
            "modules imported by the call:",
            sorted(set(sys.modules) - modules_before),
            file=sys.stderr,
        )
    print(json.dumps({"ms": elapsed * 1000, "compiles": STATS.count}))


def measure(profile: bool = False, repeats: int = 3, profile_out: list[str] = ()) -> dict:
    """Median of `repeats` cold first calls (each on a new, empty cache) and of as many warm
    ones (each a new process on the cache the cold one left)."""
    import statistics

    cold, warm, cold_compiles, warm_compiles = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("PYTHONPYCACHEPREFIX", None)  # a prefix would hide the stdlib's own .pyc files
        sources = [ROOT / "tunefuse", ROOT / "cache_db", ROOT / "tests" / "fusion_zoo.py"]
        for name in ("sqlalchemy", "alembic", "mako", "platformdirs", "psycopg"):
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.submodule_search_locations:
                sources += [pathlib.Path(p) for p in spec.submodule_search_locations]
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", *map(str, sources)], env=env, check=False
        )  # a read-only site-packages keeps the .pyc files pip wrote
        for rep in range(repeats):
            env["TUNEFUSE_CACHE_URL"] = f"sqlite:///{tmp}/cache{rep}.sqlite"
            for is_warm in (False, True):
                show = is_warm and profile and rep == repeats - 1
                args = [sys.executable, __file__, "--child"] + (
                    ["--profile"] + profile_out if show else []
                )
                out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
                if show:
                    print(out.stderr, file=sys.stderr)
                run = json.loads(out.stdout.strip().splitlines()[-1])
                (warm if is_warm else cold).append(run["ms"])
                (warm_compiles if is_warm else cold_compiles).append(run["compiles"])
    cold_ms, warm_ms = statistics.median(cold), statistics.median(warm)
    return {
        "cold_ms": round(cold_ms, 1),
        "cold_compiles": max(cold_compiles),
        "warm_ms": round(warm_ms, 1),
        "warm_compiles": max(warm_compiles),
        "speedup": round(cold_ms / warm_ms, 1),
        "cold_runs_ms": [round(x, 1) for x in cold],
        "warm_runs_ms": [round(x, 1) for x in warm],
    }


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        dumps = [a for a in sys.argv if a.startswith("--profile-out=")]
        print(
            json.dumps(measure(profile="--profile" in sys.argv or bool(dumps), profile_out=dumps))
        )
