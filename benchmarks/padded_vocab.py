"""Softmax over a vocabulary row of a padded logits buffer, as a tunefuse fusion file.

GPT-2's 50257 logits a token live in a buffer padded to 50304 (a multiple of 64, for the
matmul that wrote it); the softmax slices the row and writes a dense [rows, 50257]. Its loads
start on a 16-byte boundary each row, its stores at 50257 * row: a peeled row reads by
vectors and writes an element a lane (`reduction.PeeledRow`), where unpeeled the odd stores
hold the whole row to vector 1. `benchmarks/ab.py --fusions=benchmarks/padded_vocab.py`
times such cases (SHAPE the padded buffer's, e.g. 2048x50304).
"""

from __future__ import annotations

from collections.abc import Callable

from tunefuse import DataType, FusionDefinition
from tunefuse.fusion_file import FusionCase, randn

VOCAB, PADDED = 50257, 50304


def padded_softmax(rows: int, dtype: DataType) -> Callable[[FusionDefinition], None]:
    """softmax over dim 1 of x[:, :VOCAB] of x [rows, PADDED], in Float, written in x's
    type."""

    def define(fd: FusionDefinition) -> None:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        xf = fd.ops.cast(fd.ops.slice(x, [0, 0], [rows, VOCAB]), DataType.Float)
        e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, dims=[1], keepdim=True)))
        fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))

    return define


FUSIONS = [
    FusionCase(
        f"vocab_softmax_{dtype.name.lower()}_{rows}",
        padded_softmax(rows, dtype),
        randn((rows, PADDED), dtype=dtype),
    )
    for dtype in (DataType.Float, DataType.BFloat16)
    for rows in (512, 2048, 4096)
]
