from _torch_dtypes import torch_dtype_to_nvfuser_dtype  # noqa: F401
