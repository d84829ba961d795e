"""The fast divisors kernels of 32-bit indices unravel with (codegen.expr.fast_divisor): the
device's multiply-high, add and shift, worked on the host, is n // d for every n < 2**31."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tunefuse import FusionDefinition
from tunefuse.codegen.expr import fast_divisor, index_value, kernel_args, unravel_lines
from tunefuse.ir.dtypes import DataType

N_MAX = (1 << 31) - 1


def device_div(n: int, f: int) -> int:
    """tf_fast_div (codegen/preamble.py) in Python's integers, 32-bit as on the device."""
    magic, shift = f & 0xFFFFFFFF, f >> 32
    t = (n * magic) >> 32  # __umulhi
    total = t + n
    assert total < 1 << 32, "the sum overflowed 32 bits"
    return total >> shift


@given(d=st.integers(1, N_MAX), n=st.integers(0, N_MAX))
@settings(max_examples=2000, deadline=None)
def test_a_fast_division_is_the_integer_division(d, n):
    assert device_div(n, fast_divisor(d)) == n // d


def test_the_edges_of_a_fast_division():
    divisors = [1, 2, 3, 5, 7, 255, 256, 257, 65535, 65537, 1 << 30, (1 << 30) + 1, N_MAX]
    divisors += [(1 << k) + e for k in range(1, 31) for e in (-1, 0, 1)]
    for d in divisors:
        for n in [0, 1, d - 1, d, d + 1, 2 * d - 1, N_MAX - 1, N_MAX, N_MAX // d * d - 1]:
            if 0 <= n <= N_MAX:
                assert device_div(n, fast_divisor(d)) == n // d, (d, n)
    assert fast_divisor(0) == 0  # an empty extent: never divided by


def test_an_unravel_of_32_bit_indices_divides_by_the_fast_divisors():
    """E<j> is divided through F<j>; an extent spelled otherwise (a vector's share of one),
    and 64-bit indices, keep the division."""
    lines = "\n".join(
        unravel_lines([0, 1, 2], "r", lambda j: f"E{j}", lambda j: f"i{j}", "int", "")
    )
    assert "tf_fast_div(r_rem, F2)" in lines and "tf_fast_div(r_rem, F1)" in lines
    assert "%" not in lines and "/" not in lines
    wide = "\n".join(
        unravel_lines([0, 1], "r", lambda j: f"E{j}", lambda j: f"i{j}", "long long", "")
    )
    assert "tf_fast_div" not in wide and "r_rem % E1" in wide
    vec = "\n".join(
        unravel_lines([0, 1], "r", lambda j: f"(E{j} / 4)", lambda j: f"i{j}", "int", "")
    )
    assert "tf_fast_div" not in vec and "% (E1 / 4)" in vec


def _middle_sum_segment(outer: int, reduced: int, inner: int):  # noqa: ANN202
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, dims=[1]))
    base = np.zeros(1, np.float32)
    view = np.lib.stride_tricks.as_strided(
        base, (outer, reduced, inner), (reduced * inner * 4, inner * 4, 4)
    )
    (seg,) = fd.plan([view]).segments
    return seg


def test_a_kernel_of_32_bit_indices_takes_the_fast_divisor_of_each_inner_extent():
    seg = _middle_sum_segment(1000, 3, 7)
    assert seg.index_type == "int32"
    divisors = [
        a
        for a in kernel_args(seg, {b: DataType.Float for b in seg.buffer_ids})
        if a.kind == "divisor"
    ]
    assert [(a.name, a.ctype) for a in divisors] == [("F1", "long long"), ("F2", "long long")]
    assert [index_value(seg, a.kind, a.ref) for a in divisors] == [fast_divisor(3), fast_divisor(7)]
