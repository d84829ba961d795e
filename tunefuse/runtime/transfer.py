"""Host <-> device copies through the driver API."""

from __future__ import annotations

import numpy as np

from tunefuse.errors import ExecutionError


def _check(result: tuple) -> None:
    err = result[0]
    if int(err) != 0:
        raise ExecutionError(f"CUDA driver call failed: {err}")


def host_to_device(array: np.ndarray, ptr: int, stream_handle: int = 0) -> None:
    from cuda.bindings import driver

    host = np.ascontiguousarray(array)
    if host.nbytes:
        _check(driver.cuMemcpyHtoDAsync(ptr, host.ctypes.data, host.nbytes, stream_handle))
        _check(driver.cuStreamSynchronize(stream_handle))


def device_to_host(ptr: int, count: int, dtype: np.dtype, stream_handle: int = 0) -> np.ndarray:
    from cuda.bindings import driver

    out = np.empty(count, dtype=dtype)
    if out.nbytes:
        _check(driver.cuStreamSynchronize(stream_handle))
        _check(driver.cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes))
    return out
