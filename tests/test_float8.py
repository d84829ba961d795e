"""The 8-bit floats (Float8_e4m3fn, Float8_e5m2): stored, moved and cast, never computed with
(refused by name, as torch refuses); casts round through float to nearest even, past the
largest value to NaN (e4m3fn) or infinity (e5m2), as torch and ml-dtypes do. CPU: types,
refusals, the reference, NVRTC for every cast. GPU (marker gpu): every code and a spread of
floats against ml-dtypes, bit for bit."""

import ml_dtypes
import numpy as np
import pytest

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import A100, H100
from tunefuse.errors import DefinitionError
from tunefuse.ir.dtypes import from_any_dtype
from tunefuse.planning.plan_interpreter import run_via_plan
from tunefuse.runtime.dlpack import _CODES
from tunefuse.schedulers import scheduler_for

EIGHT = [DataType.Float8_e4m3fn, DataType.Float8_e5m2]
SOURCES = [d for d in DataType if not d.is_float8]


def cast_fusion(src: DataType, dst: DataType, rank: int = 1) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, dtype=src)
        fd.add_output(fd.ops.cast(x, dst))
    return fd


def bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bytes, but any NaN for a NaN (its sign and payload are not specified)."""
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    assert np.array_equal(got.view(np.uint8)[~nan], want.view(np.uint8)[~nan])


def spread_of_floats(rng: np.random.Generator) -> np.ndarray:
    """Every exponent from below e5m2's denormals to past its largest value, both signs,
    halfway cases of both formats, zeros, infinities, NaN."""
    mags = np.exp2(rng.uniform(-20, 18, 20000)).astype(np.float32)
    halfway = np.array(
        [
            float(ml_dtypes.finfo(t).max) * f
            for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)
            for f in (1.0, 1.03125, 1.0625, 1.0703125, 1.125)
        ],
        np.float32,
    )
    codes = np.arange(256, dtype=np.uint8)
    grids = [
        np.unique(codes.view(t).astype(np.float32))
        for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)
    ]
    grid = np.concatenate(grids)
    mids = np.concatenate([(g[:-1] + g[1:]) / 2 for g in grids])  # ties, to even
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 480, 57344, 61440], np.float32
    )
    return np.concatenate([mags, -mags, halfway, -halfway, grid, mids, special])


def test_the_types_are_one_byte_floats_named_as_nvfuser_and_torch_name_them():
    for dt, np_type, code in zip(
        EIGHT, (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2), ((10, 8), (12, 8)), strict=True
    ):
        assert dt.itemsize == 1 and dt.is_floating and dt.compute is DataType.Float
        assert dt.numpy == np.dtype(np_type) and dt.ml_dtypes
        assert DataType.parse(dt.value) is dt
        assert from_any_dtype(f"torch.{dt.value}") is dt and from_any_dtype(np.dtype(np_type)) is dt
        assert _CODES[dt] == code
    with pytest.raises(DefinitionError, match="Float8_e8m0fnu is not supported"):
        DataType.Float8_e8m0fnu.value  # noqa: B018


@pytest.mark.parametrize(
    "build,what",
    [
        (lambda fd, x, y: fd.ops.add(x, y), "an operand of add"),
        (lambda fd, x, y: fd.ops.neg(x), "an operand of neg"),
        (lambda fd, x, y: fd.ops.sum(x, dims=[0]), "reduces it"),
        (lambda fd, x, y: fd.ops.max(x, dims=[0]), "reduces it"),
        (lambda fd, x, y: fd.ops.cat([x, fd.ops.cast(y, DataType.Float)], 0), "mixed with float"),
        (lambda fd, x, y: fd.ops.mul(x, 2.0), "an operand of mul"),
        (lambda fd, x, y: fd.ops.iota(8, dtype=DataType.Float8_e4m3fn), "counts in it"),
        (
            lambda fd, x, y: fd.ops.uniform(0.0, 1.0, [8], dtype=DataType.Float8_e4m3fn),
            "draws in it",
        ),
    ],
)
def test_arithmetic_on_an_8_bit_float_is_refused_by_name(build, what):
    with pytest.raises(DefinitionError, match=f"DataType.Float8_e4m3fn is stored and cast.*{what}"):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1], dtype=DataType.Float8_e4m3fn)
            y = fd.define_tensor(shape=[-1], dtype=DataType.Float8_e4m3fn)
            fd.add_output(build(fd, x, y))


def test_moving_and_selecting_8_bit_floats_is_allowed():
    """cat of two, a transpose, where() between two: no arithmetic, the bytes as they are."""
    rng = np.random.default_rng(0)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float8_e5m2)
        y = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float8_e5m2)
        c = fd.define_tensor(shape=[-1, -1], dtype=DataType.Bool)
        fd.add_output(fd.ops.cat([x, y], 0))
        fd.add_output(fd.ops.permute(x, [1, 0]))
        fd.add_output(fd.ops.where(c, x, y))
    x, y = (rng.standard_normal((33, 65)).astype(ml_dtypes.float8_e5m2) for _ in range(2))
    c = rng.random((33, 65)) < 0.5
    cat, t, w = run_via_plan(fd.fusion, [x, y, c])
    bits_equal(cat, np.concatenate([x, y]))
    bits_equal(t, x.T)
    bits_equal(w, np.where(c, x, y))


@pytest.mark.parametrize("dst", EIGHT, ids=lambda d: d.value)
def test_the_reference_rounds_through_float_as_the_kernels_do(dst):
    """double -> fp8 is double -> float -> fp8 (torch's order); float -> fp8 is ml-dtypes'."""
    x = spread_of_floats(np.random.default_rng(1))
    (got,) = run_via_plan(cast_fusion(DataType.Float, dst).fusion, [x])
    bits_equal(got, x.astype(dst.numpy))
    d = x.astype(np.float64) * (1 + 2.0**-30)  # a double just above each float
    (got,) = run_via_plan(cast_fusion(DataType.Double, dst).fusion, [d])
    bits_equal(got, d.astype(np.float32).astype(dst.numpy))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_cast_to_and_from_an_8_bit_float_compiles(arch):
    device = {"sm_80": A100, "sm_90": H100}[arch]
    pairs = [(s, d) for d in EIGHT for s in SOURCES + EIGHT] + [
        (s, d) for s in EIGHT for d in SOURCES
    ]
    for src, dst in pairs:
        fd = cast_fusion(src, dst, rank=2)
        plan = fd.plan([np.zeros((8, 64), src.numpy)])
        for seg in plan.segments:
            params = scheduler_for(seg.scheduler).default_params(seg, device)
            ks = generate(seg, params, device, {b.id: b.dtype for b in plan.buffers})
            assert compile_kernel(ks.source, ks.name, arch).cubin, (src, dst)


def _torch():  # noqa: ANN202
    from test_gpu_execute import torch_or_skip

    return torch_or_skip()


def on_device(a: np.ndarray):  # noqa: ANN201
    """A NumPy array as a CUDA torch tensor, the ml-dtypes types by their bytes."""
    torch = _torch()
    a = np.ascontiguousarray(a)
    dt = from_any_dtype(a.dtype)
    if not dt.ml_dtypes:
        return torch.from_numpy(a).cuda()
    raw = torch.from_numpy(a.view(np.uint8 if dt.itemsize == 1 else np.int16)).cuda()
    return raw.view(getattr(torch, dt.value))


def on_host(t) -> np.ndarray:  # noqa: ANN001
    torch = _torch()
    dt = from_any_dtype(str(t.dtype))
    if not dt.ml_dtypes:
        return t.cpu().numpy()
    return t.cpu().view(torch.uint8 if dt.itemsize == 1 else torch.int16).numpy().view(dt.numpy)


@pytest.mark.gpu
@pytest.mark.parametrize("dst", EIGHT, ids=lambda d: d.value)
def test_gpu_casts_match_ml_dtypes_bit_for_bit(dst):
    x = spread_of_floats(np.random.default_rng(2))
    for src in (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16):
        a = x.astype(src.numpy)
        (got,) = cast_fusion(src, dst).execute([on_device(a)])
        bits_equal(on_host(got), a.astype(np.float32).astype(dst.numpy))
    codes = np.arange(256, dtype=np.uint8).view(dst.numpy)
    for back in (DataType.Float, DataType.Half, DataType.BFloat16, DataType.Double):
        (got,) = cast_fusion(dst, back).execute([on_device(codes)])
        want = codes.astype(np.float32).astype(back.numpy)
        np.testing.assert_array_equal(on_host(got).astype(np.float64), want.astype(np.float64))
    other = EIGHT[1 - EIGHT.index(dst)]
    (got,) = cast_fusion(dst, other).execute([on_device(codes)])
    bits_equal(on_host(got), codes.astype(np.float32).astype(other.numpy))


@pytest.mark.gpu
def test_gpu_a_per_tensor_fp8_quantization_agrees_with_the_reference():
    """The use: x * scale clamped to e4m3fn's range, stored in 8 bits, and the amax."""
    from tunefuse import reference

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        scale = fd.define_scalar(dtype=DataType.Float)
        xf = fd.ops.cast(x, DataType.Float)
        q = fd.ops.clamp(fd.ops.mul(xf, scale), -448.0, 448.0)
        fd.add_output(fd.ops.cast(q, DataType.Float8_e4m3fn))
        fd.add_output(fd.ops.max(fd.ops.abs(xf), dims=[0, 1]))
    a = (np.random.default_rng(3).standard_normal((1024, 4096)) * 3).astype(ml_dtypes.bfloat16)
    q, amax = (on_host(g) for g in fd.execute([on_device(a), 50.0]))
    want_q, want_amax = reference.run(fd.fusion, [a, 50.0])
    bits_equal(q, want_q)
    np.testing.assert_array_equal(amax, want_amax)
