"""The CUDA device as tunefuse sees it: cuda.core's Device, its properties as DeviceInfo,
loaded kernels, and allocation. Opened at the first execute, never at import."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from tunefuse.device_info import DeviceInfo
from tunefuse.errors import ExecutionError

# Without opting in, a kernel's static and dynamic shared memory together may come to 48 KB:
# a kernel of 96 bytes of static arrays that asked for 48 KB of dynamic memory failed to
# launch (CUDA_ERROR_INVALID_VALUE). So every kernel that asks for dynamic shared memory
# opts in to the bytes it asks for (one driver call when it is first loaded).


@dataclass(frozen=True)
class _ForeignStream:
    """A stream handle from another framework (torch), in cuda.core's protocol."""

    handle: int

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def _address(handle: object) -> int:
    """A driver handle's value; 0 for none (cuCtxGetCurrent before cuInit returns None)."""
    return 0 if handle is None else int(handle)  # type: ignore[call-overload]


def _current_context() -> int:
    from cuda.bindings import driver

    _, ctx = driver.cuCtxGetCurrent()
    return _address(ctx)


class Runtime:
    """One GPU: its properties, loaded kernels, streams and allocations. Every driver call
    that depends on the current context runs inside `with rt.active():`, which makes this
    device's context current for the duration and gives the caller's back afterwards (torch
    reads its current device from that context: running on cuda:1 must not move it)."""

    def __init__(self, index: int) -> None:
        try:
            from cuda.bindings import driver
            from cuda.core import Device

            if not 0 <= index < max(device_count(), 1):
                raise ValueError(f"the driver sees {device_count()} device(s)")
            previous = _current_context()
            self.device = Device(index)
            self.device.set_current()
            self._context = driver.cuCtxGetCurrent()[1]
            self._context_id = _address(self._context)
            if previous and previous != self._context_id:
                driver.cuCtxSetCurrent(driver.CUcontext(previous))
        except Exception as e:  # noqa: BLE001 - any driver failure means no usable GPU
            raise ExecutionError(
                f"no usable CUDA device {index}: {e}. tunefuse needs an NVIDIA GPU and a driver "
                "for CUDA 12 or newer to execute fusions (plans and compilation work without one)"
            ) from None
        self.index = index
        self._active = _Activation(self)
        # the driver calls of every launch, looked up once (enter/leave are on the hot path)
        self._get_current = driver.cuCtxGetCurrent
        self._push_current = driver.cuCtxPushCurrent
        self._pop_current = driver.cuCtxPopCurrent
        props = self.device.properties
        cc = self.device.compute_capability
        self.info = DeviceInfo(
            name=self.device.name,
            compute_capability=(int(cc.major), int(cc.minor)),
            sm_count=int(props.multiprocessor_count),
            max_threads_per_block=int(props.max_threads_per_block),
            max_threads_per_sm=int(props.max_threads_per_multiprocessor),
            max_blocks_per_sm=int(props.max_blocks_per_multiprocessor),
            regs_per_sm=int(props.max_registers_per_multiprocessor),
            shared_per_block=int(props.max_shared_memory_per_block),
            shared_optin_per_block=int(props.max_shared_memory_per_block_optin),
            shared_per_sm=int(props.max_shared_memory_per_multiprocessor),
            l2_bytes=int(getattr(props, "l2_cache_size", 50 * 1024 * 1024)),
        )
        with self.active():
            self.default_stream = self.device.create_stream()
        self._kernels: dict[str, object] = {}
        self._dynamic_shared: dict[str, int] = {}  # kernel name -> the bytes it may ask for
        self._streams: dict[int, object] = {}

    def active(self) -> _Activation:
        """`with rt.active():` this device's context is current inside, the caller's after."""
        return self._active

    def enter(self) -> object | None:
        """Make this device's context current; returns what `leave` needs to restore the
        caller's (None when it already was current: the common, one-GPU case costs one
        cuCtxGetCurrent)."""
        ctx = self._get_current()[1]
        if ctx is not None and int(ctx) == self._context_id:
            return None
        self._push_current(self._context)
        return ctx

    def leave(self, token: object | None) -> None:
        if token is not None:
            self._pop_current()

    @functools.cached_property
    def env(self):  # noqa: ANN201 - cache_db.Env
        """What a cached result must have been measured on to be used here."""
        from cuda.bindings import driver

        from cache_db.store import Env
        from tunefuse.codegen import CODEGEN_VERSION
        from tunefuse.compiler import nvrtc_version

        _, version = driver.cuDriverGetVersion()
        cc = self.info.compute_capability
        return Env(
            f"{cc[0]}.{cc[1]}", self.info.name, nvrtc_version(), str(version), CODEGEN_VERSION
        )

    def kernel(self, name: str, cubin: bytes, dynamic_shared: int = 0) -> object:
        """The loaded kernel `name` from `cubin` (each module loaded once), allowed the
        `dynamic_shared` bytes its launches ask for (an opt-in: see above)."""
        k = self._kernels.get(name)
        if k is None:
            from cuda.core import ObjectCode

            k = ObjectCode.from_cubin(cubin).get_kernel(name)
            self._kernels[name] = k
        if dynamic_shared > self._dynamic_shared.get(name, 0):
            self._allow_dynamic_shared(name, k, dynamic_shared)
        return k

    def _allow_dynamic_shared(self, name: str, kernel: object, nbytes: int) -> None:
        from cuda.bindings import driver

        attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        handle = kernel.handle  # type: ignore[attr-defined]
        with self.active():
            if isinstance(handle, driver.CUkernel):
                (err,) = driver.cuKernelSetAttribute(
                    attribute, nbytes, handle, driver.CUdevice(self.index)
                )
            else:
                (err,) = driver.cuFuncSetAttribute(handle, attribute, nbytes)
        if int(err) != 0:
            raise ExecutionError(
                f"kernel {name}: the device refused {nbytes} bytes of dynamic shared memory "
                f"({err}; at most {self.info.shared_optin_per_block} a block on {self.info.name})"
            )
        self._dynamic_shared[name] = nbytes

    def stream_for(self, handle: int | None) -> object:
        """cuda.core Stream for a foreign handle (None: tunefuse's default stream)."""
        if handle is None:
            return self.default_stream
        s = self._streams.get(handle)
        if s is None:
            s = self.device.create_stream(_ForeignStream(handle))
            self._streams[handle] = s
        return s

    def allocate(self, nbytes: int, stream: object) -> object:
        return self.device.allocate(max(nbytes, 1), stream=stream)

    @functools.cached_property
    def index_error_word(self) -> int:
        """This device's index-error word (an int32, 0 while no index was out of range): a
        kernel that gathers writes there the fusion value + 1 of a gather that met an index
        outside its table, instead of reading there."""
        with self.active():
            self._index_error_buffer = self.allocate(4, self.default_stream)
            ptr = int(self._index_error_buffer.handle)  # type: ignore[attr-defined]
            self.zero(ptr, 4, self.default_stream)
            self.default_stream.sync()  # type: ignore[attr-defined]
        return ptr

    def index_error(self, stream: object) -> int | None:
        """Waits for `stream`, then the fusion value of the gather that met an out-of-range
        index in the kernels before it (the word is cleared), or None."""
        from cuda.bindings import driver

        word = np.zeros(1, dtype=np.int32)
        (err,) = driver.cuMemcpyDtoHAsync(
            word.ctypes.data, self.index_error_word, 4, int(stream.handle)
        )  # type: ignore[attr-defined]
        if int(err) != 0:
            raise RuntimeError(f"reading the index-error word failed: {err}")
        stream.sync()  # type: ignore[attr-defined]
        if word[0] == 0:
            return None
        self.zero(self.index_error_word, 4, stream)
        stream.sync()  # type: ignore[attr-defined]
        return int(word[0]) - 1

    def zero(self, ptr: int, nbytes: int, stream: object) -> None:
        """Set `nbytes` at `ptr` to zero, in `stream`'s order."""
        from cuda.bindings import driver

        (err,) = driver.cuMemsetD8Async(ptr, 0, nbytes, int(stream.handle))  # type: ignore[attr-defined]
        if int(err) != 0:
            raise RuntimeError(f"cuMemsetD8Async of {nbytes} bytes failed: {err}")


class _Activation:
    """The context manager `Runtime.active()` returns (one per runtime, reentrant)."""

    __slots__ = ("rt", "tokens")

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.tokens: list = []

    def __enter__(self) -> Runtime:
        self.tokens.append(self.rt.enter())
        return self.rt

    def __exit__(self, *exc: object) -> None:
        self.rt.leave(self.tokens.pop())


@functools.cache
def runtime(index: int = 0) -> Runtime:
    """The runtime of CUDA device `index` (an explicit index: callers take it from their
    inputs or their settings, never from a default device)."""
    return Runtime(index)


def device_count() -> int:
    """How many CUDA devices the driver sees (0 without a driver)."""
    try:
        from cuda.core import system

        return int(
            system.get_num_devices() if hasattr(system, "get_num_devices") else system.num_devices
        )
    except Exception:  # noqa: BLE001
        return 0
