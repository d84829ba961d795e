"""Handlers the worker tests run in a real worker process."""

import ctypes
import os
import time


def echo(request, state):
    state["calls"] = state.get("calls", 0) + 1
    return {"echo": request, "calls": state["calls"], "setup": state["setup"]}


def misbehave(request, state):
    if request == "exit":
        os._exit(3)
    if request == "segfault":
        ctypes.string_at(0)
    if request == "hang":
        time.sleep(3600)
    if request == "raise":
        raise ValueError("bad candidate")
    return "fine"


BAD_KERNEL = r"""
extern "C" __global__ void tf_write_anywhere(float* p) { p[threadIdx.x] = 1.0f; }
"""


def illegal_address(request, state):
    """On the setup's GPU: a kernel that writes through a wild pointer (a sticky CUDA error,
    CUDA_ERROR_ILLEGAL_ADDRESS) when asked to "crash", else the device it runs on."""
    from cuda.core import LaunchConfig, launch

    from tunefuse.compiler import compile_kernel
    from tunefuse.runtime.device import runtime

    rt = runtime(state["setup"]["device"])
    if request == "crash":
        with rt.active():
            kernel = rt.kernel(
                "tf_write_anywhere",
                compile_kernel(BAD_KERNEL, "tf_write_anywhere", rt.info.arch).cubin,
            )
            launch(rt.default_stream, LaunchConfig(grid=1, block=32), kernel, 0x10)
            rt.default_stream.sync()
    from cuda.bindings import driver

    with rt.active():
        _, ordinal = driver.cuCtxGetDevice()
    return int(ordinal)
