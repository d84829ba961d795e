"""The fusions of the seed threads, as a tunefuse fusion file.

A fusion file declares `FUSIONS` (see `tunefuse.fusion_file`); the tests, the benchmarks
and `tunefuse explain examples/seed_fusions.py` read this list.
"""

from __future__ import annotations

from collections.abc import Callable

from tunefuse import DataType, FusionDefinition
from tunefuse.fusion_file import FusionCase, randn


def gelu_with_views(fd: FusionDefinition) -> None:
    """Seed 001: GELU of a transformer's feed-forward block, with bookend views."""
    T0 = fd.define_tensor(symbolic_sizes=[-1, -1], contiguous=[True, True], dtype=DataType.Float)
    T1 = fd.ops.view(T0, original_shape=[8192, 3072], new_shape=[64, 128, 3072])
    S2 = fd.define_constant(0.500000)
    T3 = fd.ops.mul(T1, S2)
    S4 = fd.define_constant(0.707107)
    T5 = fd.ops.mul(T1, S4)
    T6 = fd.ops.erf(T5)
    S7 = fd.define_constant(1.00000)
    T8 = fd.ops.add(T6, S7)
    T9 = fd.ops.mul(T3, T8)
    T10 = fd.ops.view(T9, original_shape=[64, 128, 3072], new_shape=[8192, 3072])
    fd.add_output(T10)


def gelu_without_views(fd: FusionDefinition) -> None:
    """Seed 001: the same GELU on a 3-D input, no views."""
    T0 = fd.define_tensor(
        symbolic_sizes=[-1, -1, -1], contiguous=[True, True, True], dtype=DataType.Float
    )
    T3 = fd.ops.mul(T0, fd.define_constant(0.500000))
    T6 = fd.ops.erf(fd.ops.mul(T0, fd.define_constant(0.707107)))
    T8 = fd.ops.add(T6, fd.define_constant(1.00000))
    fd.add_output(fd.ops.mul(T3, T8))


def gelu_with_views_two_outputs(fd: FusionDefinition) -> None:
    """Seed 001, fusion 12: the input view T1 is an output too."""
    T0 = fd.define_tensor(symbolic_sizes=[-1, -1], contiguous=[True, True], dtype=DataType.Float)
    T1 = fd.ops.view(T0, original_shape=[8192, 3072], new_shape=[64, 128, 3072])
    T3 = fd.ops.mul(T1, fd.define_constant(0.500000))
    T6 = fd.ops.erf(fd.ops.mul(T1, fd.define_constant(0.707107)))
    T9 = fd.ops.mul(T3, fd.ops.add(T6, fd.define_constant(1.00000)))
    T10 = fd.ops.view(T9, original_shape=[64, 128, 3072], new_shape=[8192, 3072])
    fd.add_output(T1)
    fd.add_output(T10)


def transpose_with_views(fd: FusionDefinition) -> None:
    """Seed 001: the attention-output transpose with bookend views."""
    T0 = fd.define_tensor(
        symbolic_sizes=[-1, -1, -1], contiguous=[True, True, True], dtype=DataType.Float
    )
    T1 = fd.ops.view(T0, original_shape=[768, 128, 64], new_shape=[64, 12, 128, 64])
    T2 = fd.ops.permute(T1, dims=[0, 2, 1, 3])
    T3 = fd.ops.set(T2)
    T4 = fd.ops.view(T3, original_shape=[64, 128, 12, 64], new_shape=[64, 128, 768])
    T5 = fd.ops.view(T4, original_shape=[64, 128, 768], new_shape=[8192, 768])
    fd.add_output(T5)


def sequential_views(a: bool, b: bool, c: bool) -> Callable[[FusionDefinition], None]:
    """Seed 001's study: views A, B, C around an add and a mul, each present or not."""

    def define(fd: FusionDefinition) -> None:
        shapes = [[8192, 3072], [64, 128, 3072]]
        T = fd.define_tensor(symbolic_sizes=[-1, -1], contiguous=[True, True], dtype=DataType.Float)

        def insert_view(t):  # noqa: ANN001, ANN202
            out = fd.ops.view(t, original_shape=shapes[0], new_shape=shapes[1])
            shapes.reverse()
            return out

        if a:
            T = insert_view(T)
        T = fd.ops.add(T, T)
        if b:
            T = insert_view(T)
        T = fd.ops.mul(T, T)
        if c:
            T = insert_view(T)
        fd.add_output(T)

    define.__name__ = f"sequential_views_{'A' if a else ''}{'B' if b else ''}{'C' if c else ''}"
    return define


def reshape_2_10_40(fd: FusionDefinition) -> None:
    """Seed 000: [2, 10, 40] -> [2, 10, 2, 20], decomposed as Keep, Keep, Split(2)."""
    T0 = fd.define_tensor(shape=[2, 10, 40], contiguity=[True, True, True], dtype=DataType.Float)
    T1 = fd.ops.reshape(T0, new_shape=[2, 10, 2, 20])
    fd.add_output(fd.ops.relu(T1))


SEQUENTIAL = [
    FusionCase(sequential_views(a, b, c).__name__, sequential_views(a, b, c), randn((8192, 3072)))
    for a in (True, False)
    for b in (True, False)
    for c in (True, False)
]

FUSIONS = [
    FusionCase("gelu_with_views", gelu_with_views, randn((8192, 3072))),
    FusionCase("gelu_with_views_two_outputs", gelu_with_views_two_outputs, randn((8192, 3072))),
    FusionCase("gelu_without_views", gelu_without_views, randn((64, 128, 3072))),
    FusionCase("transpose_with_views", transpose_with_views, randn((768, 128, 64))),
    FusionCase("reshape_2_10_40", reshape_2_10_40, randn((2, 10, 40))),
    *SEQUENTIAL,
]
