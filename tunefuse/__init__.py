"""tunefuse: fusions of tensor ops, concretized per input signature, compiled to CUDA with
NVRTC, tuned with Optuna, cached in SQL.

    from tunefuse import FusionDefinition, DataType
"""

from tunefuse.arrays import compute_contiguity, compute_tensor_descriptor
from tunefuse.cache import Cache
from tunefuse.errors import (
    DefinitionError,
    ExecutionError,
    InputMismatchError,
    SerializationError,
    ShapeError,
    TunefuseError,
)
from tunefuse.frontend import FusionDefinition, Scalar, Tensor
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.fusion import Fusion
from tunefuse.rng import manual_seed


def tune(fd, inputs, **options):  # noqa: ANN001, ANN201 - see tunefuse.tuning.tune
    """Tune every kernel of a fusion for `inputs` and store the winners in the cache."""
    from tunefuse.tuning import tune as _tune

    return _tune(fd, inputs, **options)


__version__ = "0.1.0"


def version() -> str:
    """The package version (nvFuser's `nvfuser.version()`)."""
    return __version__


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
    "compute_contiguity",
    "compute_tensor_descriptor",
    "manual_seed",
    "tune",
    "version",
]
