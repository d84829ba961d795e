"""Facts about a segment that several schedulers use."""

from __future__ import annotations

from tunefuse.indexing import Var
from tunefuse.segment import Segment

MAX_VECTOR_BYTES = 16


def innermost(segment: Segment) -> int:
    return len(segment.extents) - 1


def coeff(offset, segment: Segment, j: int) -> int:  # noqa: ANN001
    return offset.coeff(Var(j, segment.extents[j])) if segment.extents[j] != 1 else 0


def max_vector(segment: Segment) -> int:
    """The widest vector (in elements) every unit-stride access of the innermost dim allows:
    extent divisible, offsets and outer strides divisible, pointers aligned, <= 16 bytes."""
    if not segment.extents:
        return 1
    last = innermost(segment)
    accesses = [(ld.offset, ld.dtype, ld.buffer) for ld in segment.loads] + [
        (st.offset, st.dtype, st.buffer) for st in segment.stores]
    if any(not off.is_affine for off, _, _ in accesses):
        return 1
    alignment = dict(segment.buffer_alignments)
    stores_unit = all(coeff(st.offset, segment, last) == 1 for st in segment.stores)
    if not stores_unit:
        return 1
    best = 1
    for vec in (2, 4, 8, 16):
        ok = segment.extents[last] % vec == 0
        for off, dtype, buf in accesses:
            c = coeff(off, segment, last)
            if c == 0:
                continue
            if c != 1 or vec * dtype.itemsize > MAX_VECTOR_BYTES:
                if c == 1:
                    ok = False
                continue
            if off.const % vec or any(coeff(off, segment, j) % vec for j in range(last)):
                ok = False
            if alignment.get(buf, 1) < vec * dtype.itemsize:
                ok = False
        if not ok:
            break
        best = vec
    return best
