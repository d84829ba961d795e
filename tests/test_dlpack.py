"""DLPack export of DeviceArray, read back through DLPack's C structs (no GPU needed: the
capsule describes memory, it does not touch it). A GPU test hands one to torch."""

import ctypes
import gc

import pytest

from tunefuse.ir.dtypes import DataType
from tunefuse.runtime import dlpack
from tunefuse.runtime.device_array import DeviceArray


class FakeBuffer:
    """Stands in for a cuda.core Buffer: an address and a device, never dereferenced here."""

    handle = 0x7F00_0000_1000
    device_id = 1


def read_capsule(capsule, name=b"dltensor"):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.cast(get(capsule, name), ctypes.POINTER(dlpack.DLManagedTensor)).contents


def test_capsule_describes_the_view_and_its_consumer_releases_it():
    array = DeviceArray(FakeBuffer(), (3, 4), DataType.BFloat16, (1, 3), offset=2)
    assert array.__dlpack_device__() == (dlpack.KDL_CUDA, 1)
    before = len(dlpack._LIVE)
    capsule = array.__dlpack__(stream=None, max_version=(1, 0))
    t = read_capsule(capsule).dl_tensor
    assert t.data == FakeBuffer.handle + 2 * 2 and (t.device.device_type, t.device.device_id) == (
        2,
        1,
    )
    assert (
        t.ndim == 2
        and [t.shape[k] for k in range(2)] == [3, 4]
        and [t.strides[k] for k in range(2)] == [1, 3]
    )
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (4, 16, 1) and t.byte_offset == 0
    assert len(dlpack._LIVE) == before + 1
    # What a consumer does: rename the capsule, own the tensor, call its deleter when done.
    managed = read_capsule(capsule)
    rename = ctypes.pythonapi.PyCapsule_SetName
    rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
    assert rename(capsule, b"used_dltensor") == 0
    managed.deleter(ctypes.pointer(managed))
    assert len(dlpack._LIVE) == before
    del capsule
    gc.collect()
    assert len(dlpack._LIVE) == before  # the collected, consumed capsule releases nothing twice


def test_an_unconsumed_capsule_releases_its_tensor_when_collected():
    before = len(dlpack._LIVE)
    capsule = DeviceArray(FakeBuffer(), (5,), DataType.Float).__dlpack__()
    assert len(dlpack._LIVE) == before + 1
    del capsule
    gc.collect()
    assert len(dlpack._LIVE) == before


@pytest.mark.parametrize("dtype", list(DataType), ids=lambda d: d.value)
def test_every_dtype_has_its_dlpack_type(dtype):
    t = read_capsule(DeviceArray(FakeBuffer(), (2,), dtype).__dlpack__()).dl_tensor
    assert t.dtype.bits == dtype.itemsize * 8 and t.dtype.lanes == 1


def test_copies_and_other_devices_are_refused():
    array = DeviceArray(FakeBuffer(), (2,), DataType.Float)
    with pytest.raises(BufferError, match="copy=True"):
        array.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="device 1, not"):
        array.__dlpack__(dl_device=(2, 0))
