"""NVRTC through `cuda.core.Program`: CUDA C++ -> cubin for an exact `sm_XX`.

A pure function of (source, arch, options), memoized in-process; the persistent cache
stores its output by the sha256 of the same triple.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from tunefuse import keys
from tunefuse.errors import ExecutionError

COMPILE_OPTIONS = ("-std=c++17", "--use_fast_math=false", "-default-device")


class CompileError(ExecutionError):
    """NVRTC rejected a generated kernel; carries the source and the log."""

    def __init__(self, message: str, source: str, log: str) -> None:
        super().__init__(f"{message}\n--- NVRTC log ---\n{log}\n--- source ---\n{source}")
        self.source = source
        self.log = log


@dataclass(frozen=True)
class CompiledKernel:
    name: str
    arch: str
    cubin: bytes
    nvrtc_version: str
    options: tuple[str, ...]
    compile_ms: float
    log: str

    @property
    def sha256(self) -> str:
        return keys.binary_digest(self.cubin)


@functools.cache
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def source_key(
    source: str, arch: str, options: tuple[str, ...] = (), nvrtc: str | None = None
) -> str:
    """What a binary is stored under: everything that decides its bytes (the NVRTC version
    this process has, unless `nvrtc` names another: checking an imported binary's key)."""
    return keys.source_key(source, arch, nvrtc if nvrtc is not None else nvrtc_version(), options)


@dataclass
class CompileStats:
    """NVRTC work done by this process (the cache's job is to keep it at zero)."""

    count: int = 0
    total_ms: float = 0.0


STATS = CompileStats()


@functools.lru_cache(maxsize=4096)
def compile_kernel(source: str, name: str, arch: str) -> CompiledKernel:
    """Compile `source` for `arch` (e.g. "sm_90") to a cubin; raises CompileError."""
    from cuda.core import Program, ProgramOptions

    start = time.perf_counter()
    options = ProgramOptions(arch=arch, std="c++17", use_fast_math=False)
    try:
        program = Program(source, "c++", options)
        obj = program.compile("cubin", logs=None)
    except Exception as e:  # noqa: BLE001 - NVRTC reports through exceptions with the log
        raise CompileError(
            f"NVRTC could not compile kernel {name} for {arch}: {e}", source, str(e)
        ) from None
    elapsed = (time.perf_counter() - start) * 1000
    STATS.count += 1
    STATS.total_ms += elapsed
    return CompiledKernel(
        name, arch, bytes(obj.code), nvrtc_version(), COMPILE_OPTIONS, elapsed, ""
    )
