"""Which CUDA device a pointer's memory lives on: the one driver query the array layer needs,
in a module that imports nothing else of tunefuse's runtime (arrays.py sits below it)."""

from __future__ import annotations

from tunefuse.errors import ExecutionError


def pointer_device(ptr: int) -> int:
    """The CUDA device that memory at `ptr` lives on, asked of the driver."""
    from cuda.bindings import driver

    err, ordinal = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr
    )
    if int(err) != 0:
        raise ExecutionError(f"cannot tell the CUDA device of pointer {ptr:#x}: {err}")
    return int(ordinal)
