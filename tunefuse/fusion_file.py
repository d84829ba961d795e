"""Fusion files: Python files that declare fusions and the inputs to plan or tune them for.

A fusion file defines `FUSIONS`, a list of `FusionCase`s:

    from tunefuse import DataType, FusionDefinition
    from tunefuse.fusion_file import FusionCase, randn

    def bias_gelu(fd: FusionDefinition) -> None:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        ...

    FUSIONS = [FusionCase("bias_gelu", bias_gelu, randn((8192, 3072)))]

The file is the user's own code, run as a module (like a test file); the fusions it builds
are then plain data.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tunefuse.errors import DefinitionError, TunefuseError
from tunefuse.frontend import FusionDefinition
from tunefuse.ir.dtypes import DataType


@dataclass(frozen=True)
class FusionCase:
    name: str
    define: Callable[[FusionDefinition], None]
    example_inputs: Callable[[np.random.Generator], list]

    def build(self) -> FusionDefinition:
        with FusionDefinition() as fd:
            self.define(fd)
        return fd


def randn(
    *shapes: Sequence[int], dtype: DataType = DataType.Float
) -> Callable[[np.random.Generator], list]:
    """Example inputs: one standard-normal array per shape."""

    def make(rng: np.random.Generator) -> list:
        return [rng.standard_normal(tuple(s), dtype=np.float32).astype(dtype.numpy) for s in shapes]

    return make


def load_fusion_file(path: str | pathlib.Path) -> list[FusionCase]:
    path = pathlib.Path(path)
    if not path.is_file():
        raise DefinitionError(f"fusion file {path} does not exist")
    name = f"tunefuse_fusion_file_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise DefinitionError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise DefinitionError(f"{path}:{e.lineno}: {e.msg}") from None
    except TunefuseError as e:
        sys.modules.pop(name, None)
        raise DefinitionError(f"{path}: {e}") from None
    except Exception as e:
        sys.modules.pop(name, None)
        raise DefinitionError(f"{path}: running it raised {type(e).__name__}: {e}") from None
    cases = getattr(module, "FUSIONS", None)
    if not isinstance(cases, list) or not all(isinstance(c, FusionCase) for c in cases):
        raise DefinitionError(
            f"{path} must define FUSIONS, a list of tunefuse.fusion_file.FusionCase"
        )
    return cases
