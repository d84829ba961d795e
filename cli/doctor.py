"""`tunefuse doctor`: is this set-up able to run, compile, cache and tune?"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console


def doctor(
    cache: Annotated[str | None, typer.Option("--cache", help="Cache URL (default as the library).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Only what a health check needs: cache and driver.")] = False,
) -> None:
    """Check the GPU, driver, NVRTC, cuda-python and the cache; each line ok or what to do."""
    console = Console(soft_wrap=True)
    failures = 0

    def line(ok: bool, what: str, detail: str) -> None:
        nonlocal failures
        failures += not ok
        console.print(f"{'[green]ok[/green]  ' if ok else '[red]FAIL[/red]'} {what}: {detail}")

    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        line(int(err) == 0 and version >= 12000, "driver", f"CUDA {version // 1000}.{version % 1000 // 10}"
             if int(err) == 0 else f"{err}: install an NVIDIA driver for CUDA 12 or newer")
    except Exception as e:  # noqa: BLE001
        line(False, "driver", f"{e}: install an NVIDIA driver for CUDA 12 or newer")
    if not quick:
        try:
            from tunefuse.runtime.device import runtime

            rt = runtime(0)
            line(True, "GPU", f"{rt.info.name} ({rt.info.arch}, {rt.info.sm_count} SMs)")
        except Exception as e:  # noqa: BLE001
            line(False, "GPU", str(e))
        try:
            from tunefuse.compiler import compile_kernel, nvrtc_version

            compile_kernel('extern "C" __global__ void k() {}', "k", "sm_90")
            line(True, "NVRTC", nvrtc_version())
        except Exception as e:  # noqa: BLE001
            line(False, "NVRTC", f"{e}: pip install nvidia-cuda-nvrtc")
        try:
            import cuda.core

            line(True, "cuda-python", f"cuda.core {cuda.core.__version__}")
        except Exception as e:  # noqa: BLE001
            line(False, "cuda-python", f"{e}: pip install cuda-python cuda-core")
    try:
        from cache_db import migrate
        from cache_db.store import CacheStore

        store = CacheStore.open(cache)
        revision = migrate.current_revision(store.engine)
        stats = store.stats()
        line(revision == migrate.HEAD, "cache", f"{store.url.split('@')[-1]} at revision {revision}, "
             f"{stats.records} records, jobs {stats.jobs or 'none'}")
    except Exception as e:  # noqa: BLE001
        line(False, "cache", f"{e}: check TUNEFUSE_CACHE_URL or --cache")
    raise typer.Exit(1 if failures else 0)
