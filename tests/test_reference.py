"""The NumPy reference interpreter: every op, the seed fusions, dtype semantics."""

import math

import ml_dtypes
import numpy as np
import pytest
from test_frontend import ROOT

from tunefuse import (
    DataType,
    DefinitionError,
    FusionDefinition,
    InputMismatchError,
    ShapeError,
    reference,
)
from tunefuse.fusion_file import load_fusion_file

SEEDS = {c.name: c for c in load_fusion_file(ROOT / "examples" / "seed_fusions.py")}


def gelu(x):
    erf = np.vectorize(math.erf)
    return (x * 0.5) * (erf(x * np.float32(0.707107)) + 1)


def test_seed_gelu_with_views(rng):
    (x,) = SEEDS["gelu_with_views"].example_inputs(rng)
    (out,) = reference.run(SEEDS["gelu_with_views"].build().fusion, [x])
    assert out.shape == (8192, 3072) and out.dtype == np.float32
    idx = rng.integers(0, x.size, 1000)
    np.testing.assert_allclose(
        out.ravel()[idx], gelu(x.ravel()[idx].astype(np.float64)), rtol=1e-6, atol=1e-6
    )


def test_seed_gelu_two_outputs_returns_the_view_too(rng):
    x = rng.standard_normal((8192, 3072), dtype=np.float32)
    t1, t10 = reference.run(SEEDS["gelu_with_views_two_outputs"].build().fusion, [x])
    np.testing.assert_array_equal(t1, x.reshape(64, 128, 3072))
    assert t10.shape == (8192, 3072)


def test_seed_transpose_with_views(rng):
    (x,) = SEEDS["transpose_with_views"].example_inputs(rng)
    (out,) = reference.run(SEEDS["transpose_with_views"].build().fusion, [x])
    np.testing.assert_array_equal(
        out, x.reshape(64, 12, 128, 64).transpose(0, 2, 1, 3).reshape(8192, 768)
    )


@pytest.mark.parametrize("name", [n for n in SEEDS if n.startswith("sequential")])
def test_seed_sequential_view_placements(name, rng):
    x = rng.standard_normal((8192, 3072), dtype=np.float32)
    (out,) = reference.run(SEEDS[name].build().fusion, [x])
    views = sum(c in name.split("_")[-1] for c in "ABC")
    assert out.shape == ((64, 128, 3072) if views % 2 else (8192, 3072))
    np.testing.assert_array_equal(out.ravel(), ((x + x) * (x + x)).ravel())


def test_seed_reshape_2_10_40(rng):
    (x,) = SEEDS["reshape_2_10_40"].example_inputs(rng)
    (out,) = reference.run(SEEDS["reshape_2_10_40"].build().fusion, [x])
    np.testing.assert_array_equal(out, np.maximum(x.reshape(2, 10, 2, 20), 0))


NUMPY_UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "erf": np.vectorize(math.erf),
    "erfc": np.vectorize(math.erfc),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "trunc": np.trunc,
    "sign": np.sign,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "isfinite": np.isfinite,
    "logical_not": np.logical_not,
}


@pytest.mark.parametrize("op", sorted(NUMPY_UNARY))
def test_unary_ops_match_numpy_in_double(op):
    x = np.array([0.3, 1.7, 2.5, -0.5, 0.0, np.nan, np.inf], dtype=np.float64)
    if op in ("log", "log2", "sqrt", "rsqrt", "log1p"):
        x = np.abs(x) + 0.1
    with FusionDefinition() as fd:
        fd.add_output(getattr(fd.ops, op)(fd.define_tensor(shape=[-1], dtype=DataType.Double)))
    (out,) = reference.run(fd.fusion, [x])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(out, NUMPY_UNARY[op](x), rtol=1e-12)


NUMPY_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "truediv": np.divide,
    "fmod": np.fmod,
    "remainder": np.remainder,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "atan2": np.arctan2,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "nextafter": np.nextafter,
}


@pytest.mark.parametrize("op", sorted(NUMPY_BINARY))
def test_binary_ops_match_numpy(op, rng):
    a = rng.uniform(0.1 if op == "pow" else -3, 3, (4, 5))
    b = rng.uniform(0.5, 3, (1, 5))
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Double)
        y = fd.define_tensor(shape=[1, -1], dtype=DataType.Double)
        fd.add_output(getattr(fd.ops, op)(x, y))
    (out,) = reference.run(fd.fusion, [a, b])
    np.testing.assert_allclose(out, NUMPY_BINARY[op](a, b), rtol=1e-12)


def test_bitwise_ops_on_integers():
    a = np.array([1, 6, -3], dtype=np.int32)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Int32)
        fd.add_output(fd.ops.bitwise_and(x, 3))
        fd.add_output(fd.ops.bitwise_or(x, 8))
        fd.add_output(fd.ops.bitwise_xor(x, x))
        fd.add_output(fd.ops.bitwise_not(x))
    outs = reference.run(fd.fusion, [a])
    np.testing.assert_array_equal(outs[0], a & 3)
    np.testing.assert_array_equal(outs[1], a | 8)
    np.testing.assert_array_equal(outs[2], np.zeros(3))
    np.testing.assert_array_equal(outs[3], ~a)
    assert [o.dtype for o in outs] == [np.int32] * 4  # a Python int does not widen Int32


def integer_ops_fusion(dtype: DataType) -> FusionDefinition:
    """nvFuser's integer ops on two integer tensors: div (truncating), gcd, the three shifts."""
    with FusionDefinition() as fd:
        x, y = (fd.define_tensor(shape=[-1], dtype=dtype) for _ in range(2))
        for op in (
            "div",
            "gcd",
            "bitwise_left_shift",
            "bitwise_right_shift",
            "logical_right_shift",
        ):
            fd.add_output(getattr(fd.ops, op)(x, y))
        fd.add_output(fd.ops.signbit(x))
    return fd


INTEGER_CASES = (
    np.array([7, -7, 7, -7, 12, -(2**31), 0, -1, 5, -5, 1, -8]),
    np.array([2, 2, -2, -2, 18, -1, 0, 0, 31, 32, -1, 70]),
)


@pytest.mark.parametrize("dtype", [DataType.Int, DataType.Int32])
def test_integer_ops_match_c_and_torch(dtype):
    """div truncates toward zero (x / 0 is 0, MIN / -1 wraps); gcd is non-negative; a shift by
    a negative or too wide amount shifts everything out; signbit of ints is x < 0."""
    a, b = (x.astype(dtype.numpy) for x in INTEGER_CASES)
    outs = reference.run(integer_ops_fusion(dtype).fusion, [a, b])
    assert [o.dtype for o in outs] == [dtype.numpy] * 5 + [np.bool_]
    q, g, shl, sar, shr, sign = (o.tolist() for o in outs)
    bits = 8 * np.dtype(dtype.numpy).itemsize

    def wrap(v: int) -> int:
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >= 1 << (bits - 1) else v

    pairs = list(zip(INTEGER_CASES[0].tolist(), INTEGER_CASES[1].tolist()))
    inside = [0 <= y < bits for _, y in pairs]
    assert q == [3, -3, -3, 3, 0, wrap(2**31), 0, 0, 0, 0, -1, 0]  # MIN / -1 wraps in int32
    assert g == [1, 1, 1, 1, 6, 1, 0, 1, 1, 1, 1, 2]
    assert shl == [wrap(x << y) if ok else 0 for (x, y), ok in zip(pairs, inside)]
    assert sar == [x >> y if ok else -int(x < 0) for (x, y), ok in zip(pairs, inside)]
    assert shr == [wrap((x % (1 << bits)) >> y) if ok else 0 for (x, y), ok in zip(pairs, inside)]
    assert sign == [v < 0 for v in INTEGER_CASES[0]]


def test_signbit_of_floats_sees_negative_zero():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.signbit(fd.define_tensor(shape=[-1], dtype=DataType.Float)))
    (out,) = reference.run(fd.fusion, [np.array([-0.0, 0.0, -1.5, np.inf, -np.inf], np.float32)])
    assert out.tolist() == [True, False, True, False, True]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda fd, f, i: fd.ops.gcd(f, i), "gcd: needs integer operands, got float"),
        (lambda fd, f, i: fd.ops.bitwise_left_shift(fd.ops.gt(i, 0), i), None),
        (
            lambda fd, f, i: fd.ops.nextafter(*[fd.ops.cast(f, DataType.BFloat16)] * 2),
            "steps of bfloat16",
        ),
    ],
)
def test_integer_and_step_ops_refuse_what_they_cannot_do(build, message):
    with FusionDefinition() as fd:
        f = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        if message is None:
            build(fd, f, i)  # bool << int64 promotes to int64
        else:
            with pytest.raises(DefinitionError, match=message):
                build(fd, f, i)
        fd.add_output(f)


def test_ternary_ops(rng):
    a, b, w = rng.standard_normal((3, 6))
    with FusionDefinition() as fd:
        x, y, z = (fd.define_tensor(shape=[-1], dtype=DataType.Double) for _ in range(3))
        fd.add_output(fd.ops.where(fd.ops.gt(x, 0.0), y, z))
        fd.add_output(fd.ops.clamp(x, -0.5, 0.5))
        fd.add_output(fd.ops.lerp(x, y, z))
        fd.add_output(fd.ops.addcmul(x, y, z, 2.0))
    outs = reference.run(fd.fusion, [a, b, w])
    np.testing.assert_allclose(outs[0], np.where(a > 0, b, w))
    np.testing.assert_allclose(outs[1], np.clip(a, -0.5, 0.5))
    np.testing.assert_allclose(outs[2], a + w * (b - a))
    np.testing.assert_allclose(outs[3], a + 2 * b * w)


@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(rng, keepdim):
    a = rng.standard_normal((3, 4, 5))
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Double)
        for op in ("sum", "prod", "max", "min", "mean"):
            fd.add_output(getattr(fd.ops, op)(x, dims=[0, -1], keepdim=keepdim))
        fd.add_output(fd.ops.var(x, dims=[1], correction=1, keepdim=keepdim))
        v, m = fd.ops.var_mean(x, dims=[1], correction=0, keepdim=keepdim)
        fd.add_output(v)
        fd.add_output(m)
    outs = reference.run(fd.fusion, [a])
    expect = [
        f(a, axis=(0, 2), keepdims=keepdim) for f in (np.sum, np.prod, np.max, np.min, np.mean)
    ]
    expect += [
        a.var(axis=1, ddof=1, keepdims=keepdim),
        a.var(axis=1, keepdims=keepdim),
        a.mean(axis=1, keepdims=keepdim),
    ]
    for o, e in zip(outs, expect):
        np.testing.assert_allclose(o, e, rtol=1e-12)


def test_views_and_copies(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1])
        y = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.permute(x, dims=[2, 0, 1]))
        fd.add_output(fd.ops.broadcast_in_dim(y, shape=[2, 3, 4], broadcast_dims=[2]))
        fd.add_output(fd.ops.expand(fd.ops.broadcast(y, [True, False]), shape=[3, -1]))
        fd.add_output(fd.ops.squeeze(fd.ops.unsqueeze(x, dim=1), dims=[1]))
        fd.add_output(fd.ops.slice(x, [0, 1, 0], [2, 3, 4], [1, 1, 2]))
        fd.add_output(fd.ops.pad(x, [1, 2, -1, 0], 7.0))
        fd.add_output(fd.ops.cat([x, x], dim=1))
        fd.add_output(fd.ops.reshape(x, new_shape=[-1, 4]))
    outs = reference.run(fd.fusion, [a, b])
    np.testing.assert_array_equal(outs[0], a.transpose(2, 0, 1))
    np.testing.assert_array_equal(outs[1], np.broadcast_to(b, (2, 3, 4)))
    np.testing.assert_array_equal(outs[2], np.broadcast_to(b, (3, 4)))
    np.testing.assert_array_equal(outs[3], a)
    np.testing.assert_array_equal(outs[4], a[:, 1:3, ::2])
    np.testing.assert_array_equal(
        outs[5], np.pad(a[:, 1:, :], [(0, 0), (0, 0), (1, 2)], constant_values=7)
    )
    np.testing.assert_array_equal(outs[6], np.concatenate([a, a], axis=1))
    np.testing.assert_array_equal(outs[7], a.reshape(-1, 4))


def test_dynamic_reshape_from_scalar_inputs(rng):
    a = rng.standard_normal((8, 15, 7, 9)).astype(np.float32)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1, -1])
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.reshape(x, new_shape=[8, n, -1, 9]))
    np.testing.assert_array_equal(reference.run(fd.fusion, [a, 3])[0], a.reshape(8, 3, 35, 9))
    np.testing.assert_array_equal(reference.run(fd.fusion, [a, 5])[0], a.reshape(8, 5, 21, 9))
    with pytest.raises(ShapeError, match="invalid for input of size"):
        reference.run(fd.fusion, [a, 4])


def test_creation_ops():
    with FusionDefinition() as fd:
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.full([2, n], 1.5, DataType.Half))
        fd.add_output(fd.ops.zeros([3], DataType.Int32))
        fd.add_output(fd.ops.ones([1, 2], DataType.BFloat16))
        fd.add_output(fd.ops.iota(n, 2.0, 0.5, DataType.Float))
    full, zeros, ones, iota = reference.run(fd.fusion, [4])
    assert full.shape == (2, 4) and full.dtype == np.float16 and (full == 1.5).all()
    assert zeros.dtype == np.int32 and not zeros.any()
    assert ones.dtype == ml_dtypes.bfloat16 and (ones == 1).all()
    np.testing.assert_array_equal(iota, [2.0, 2.5, 3.0, 3.5])


def test_half_and_bfloat16_compute_in_float_and_round_each_result():
    a = np.array([1000.0, 0.1, 3.0], dtype=np.float16)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Half)
        fd.add_output(fd.ops.sub(fd.ops.add(x, 0.0004), x))  # each result rounds to half
        fd.add_output(fd.ops.sum(fd.ops.cast(x, DataType.BFloat16), dims=[0]))
    diff, total = reference.run(fd.fusion, [a])
    expected = (a.astype(np.float32) + np.float32(0.0004)).astype(np.float16)
    np.testing.assert_array_equal(
        diff, (expected.astype(np.float32) - a.astype(np.float32)).astype(np.float16)
    )
    assert total.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(
        float(total),
        float(a.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32).sum()),
        rtol=1e-2,
    )


def test_input_mismatch_errors():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 4], dtype=DataType.Float)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.mul(x, s))
    f = fd.fusion
    with pytest.raises(InputMismatchError, match="takes 2 inputs, got 1"):
        reference.run(f, [np.zeros((2, 4), np.float32)])
    with pytest.raises(
        InputMismatchError, match="input 0 \\(T0\\): declared dtype float, got double"
    ):
        reference.run(f, [np.zeros((2, 4)), 1.0])
    with pytest.raises(InputMismatchError, match="input 0 \\(T0\\): dim 1 declared size 4, got 5"):
        reference.run(f, [np.zeros((2, 5), np.float32), 1.0])
    with pytest.raises(InputMismatchError, match="input 1 \\(S1\\): expected a double scalar"):
        reference.run(f, [np.zeros((2, 4), np.float32), np.zeros(3)])
