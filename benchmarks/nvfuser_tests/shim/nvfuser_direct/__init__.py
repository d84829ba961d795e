"""Shim: nvfuser_direct -> tunefuse (module names only)."""

from tunefuse import (  # noqa: F401  # noqa: F401
    DataType,
    FusionDefinition,
    compute_contiguity,
    compute_tensor_descriptor,
    version,
)
