"""DLPack export of tunefuse's DeviceArray: a legacy `dltensor` capsule over the array's
device memory (no copy), for `torch.from_dlpack`, `cupy.from_dlpack`, JAX and the rest.

The structs are DLPack's C ABI (dlpack.h, v0.8 `DLManagedTensor`). The capsule keeps the
array alive until the consumer calls the deleter, or until the capsule is collected unused.
"""

from __future__ import annotations

import ctypes

from tunefuse.ir.dtypes import DataType

KDL_CUDA = 2
_CODES = {  # DataType -> (DLDataTypeCode, bits)
    DataType.Int: (0, 64),
    DataType.Int32: (0, 32),
    DataType.Double: (2, 64),
    DataType.Float: (2, 32),
    DataType.Half: (2, 16),
    DataType.BFloat16: (4, 16),
    DataType.Float8_e4m3fn: (10, 8),  # kDLFloat8_e4m3fn (DLPack 1.1)
    DataType.Float8_e5m2: (12, 8),  # kDLFloat8_e5m2
    DataType.Bool: (6, 8),
}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    """Declared before its fields: the deleter's type points back at it."""


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _Deleter),
]

_LIVE: dict[int, tuple] = {}  # manager_ctx -> what the capsule's memory and array need alive


@_Deleter
def _delete(managed: ctypes._Pointer) -> None:  # type: ignore[name-defined]
    _LIVE.pop(managed.contents.manager_ctx, None)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


@ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    """A capsule collected without a consumer still owns its tensor: release it."""
    if _capsule_is_valid(capsule, b"dltensor"):
        pointer = _capsule_pointer(capsule, b"dltensor")
        _delete(ctypes.cast(pointer, ctypes.POINTER(DLManagedTensor)))


def to_dlpack(
    owner: object,
    data_ptr: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: DataType,
    device_id: int,
) -> object:
    """A `dltensor` capsule for `shape`/`strides` (in elements) of `dtype` at `data_ptr`
    on CUDA device `device_id`; `owner` stays alive while the capsule or its consumer needs it."""
    if dtype not in _CODES:
        raise TypeError(f"DLPack has no type for {dtype.value}")
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides)
    code, bits = _CODES[dtype]
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(
        data_ptr,
        DLDevice(KDL_CUDA, device_id),
        ndim,
        DLDataType(code, bits, 1),
        shape_arr,
        strides_arr,
        0,
    )
    key = ctypes.addressof(managed)
    managed.manager_ctx = key
    managed.deleter = _delete
    _LIVE[key] = (managed, shape_arr, strides_arr, owner)
    return _capsule_new(key, b"dltensor", ctypes.cast(_capsule_destructor, ctypes.c_void_p))
