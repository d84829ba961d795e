"""tunefuse: fusions of tensor ops, concretized per input signature, compiled to CUDA with
NVRTC, tuned with Optuna, cached in SQL.

    from tunefuse import FusionDefinition, DataType
"""

from tunefuse.cache import Cache
from tunefuse.dtypes import DataType
from tunefuse.errors import (
    DefinitionError,
    ExecutionError,
    InputMismatchError,
    SerializationError,
    ShapeError,
    TunefuseError,
)
from tunefuse.frontend import FusionDefinition, Scalar, Tensor
from tunefuse.ir import Fusion

__version__ = "0.1.0"

__all__ = [
    "Cache",
    "DataType",
    "DefinitionError",
    "ExecutionError",
    "Fusion",
    "FusionDefinition",
    "InputMismatchError",
    "Scalar",
    "SerializationError",
    "ShapeError",
    "Tensor",
    "TunefuseError",
]
