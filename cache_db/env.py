"""Where a cached result was measured (device, compiler, driver, codegen): a record or binary
is never used outside its env. Its own module: the store and the import checks both read it."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from tunefuse import keys


@dataclass(frozen=True, slots=True)
class Env:
    """Where a result was measured: a record is never used outside its env."""

    compute_capability: str
    device_name: str
    nvrtc_version: str
    driver_version: str
    codegen_version: str

    @property
    def key(self) -> str:
        return _env_key(self)

    @property
    def arch(self) -> str:
        """The NVRTC target its binaries are compiled for ("9.0" -> "sm_90")."""
        return "sm_" + self.compute_capability.replace(".", "")


@functools.lru_cache(maxsize=64)
def _env_key(env: Env) -> str:
    return keys.env_key(asdict(env))
