"""uniform and normal on the CPU: Philox against Random123's known answers, reproducibility from
a seed and offset, the process stream (`manual_seed`) for draws given none, numbers that do not
depend on the schedule (the plan interpreter agrees with the reference bit for bit), the
errors, the printer and JSON round trips, and NVRTC compiling every kernel they make.
tests/test_gpu_random.py runs the same fusions on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from test_codegen_compile import ARCHS, compile_plan

import tunefuse
from tunefuse import DataType, FusionDefinition, reference, rng
from tunefuse.errors import DefinitionError
from tunefuse.ir.serialize import fusion_from_json
from tunefuse.philox import philox
from tunefuse.planning.plan_interpreter import run_via_plan

FLOATING = [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16]


def random_fusion(op: str, dtype: DataType, seeded: bool = True) -> FusionDefinition:
    """x * draw(shape of x) + draw, the draw between -1.5 and 2.0 (or mean -1.5, std 2.0)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        kw = {}
        if seeded:
            kw = {
                "rng_seed": fd.define_scalar(DataType.Int),
                "rng_offset": fd.define_scalar(DataType.Int),
            }
        t = getattr(fd.ops, op)(-1.5, 2.0, x.shape(), dtype=dtype, **kw)
        fd.add_output(t)
        fd.add_output(fd.ops.mul(x, fd.ops.cast(t, DataType.Float)))
    return fd


def test_philox_gives_random123s_known_answers():
    """Random123's kat_vectors for philox4x32-10: counter 0 / key 0, and all ones."""
    words = philox(np.array([0], np.int64), 0, 0)
    assert [int(w[0]) for w in words] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    words = philox(np.array([-1], np.int64), -1, -1)
    assert [int(w[0]) for w in words] == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


@pytest.mark.parametrize("dtype", FLOATING)
def test_uniform_is_reproducible_in_range_and_uniform(dtype):
    fd = random_fusion("uniform", dtype)
    x = np.ones((256, 1000), np.float32)
    a = reference.run(fd, [x, 7, 3])[0]
    b = reference.run(fd, [x, 7, 3])[0]
    c = reference.run(fd, [x, 7, 4])[0]
    d = reference.run(fd, [x, 8, 3])[0]
    assert a.dtype == dtype.numpy and np.array_equal(a, b)
    assert np.mean(a != c) > 0.9 and np.mean(a != d) > 0.9
    f = a.astype(np.float64)
    assert f.min() >= -1.5 and f.max() <= 2.0  # half and bfloat16 may round up to 2.0
    assert abs(f.mean() - 0.25) < 0.01 and abs(f.std() - 3.5 / np.sqrt(12)) < 0.01
    counts = np.histogram(f, bins=10, range=(-1.5, 2.0))[0]
    assert counts.min() > 0.9 * f.size / 10


@pytest.mark.parametrize("dtype", FLOATING)
def test_normal_has_its_mean_and_deviation(dtype):
    fd = random_fusion("normal", dtype)
    f = reference.run(fd, [np.ones((256, 1000), np.float32), 11, 0])[0].astype(np.float64)
    assert np.isfinite(f).all()
    assert abs(f.mean() + 1.5) < 0.02 and abs(f.std() - 2.0) < 0.02
    assert abs(np.mean(np.abs(f + 1.5) < 2.0) - 0.6827) < 0.01  # one sigma


@pytest.mark.parametrize("op", ["uniform", "normal"])
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double, DataType.BFloat16])
def test_the_plan_draws_what_the_reference_draws(op, dtype, rng):
    """The numbers depend on the element's position only: the kernel (here the plan
    interpreter) and the reference agree bit for bit."""
    fd = random_fusion(op, dtype)
    x = rng.standard_normal((33, 130)).astype(np.float32)
    want = reference.run(fd, [x, 2**40 + 5, -3])
    got = run_via_plan(fd.fusion, [x, 2**40 + 5, -3])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_broadcast_draw_repeats_along_the_broadcast_dim():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        row = fd.ops.uniform(0.0, 1.0, [1, x.size(1)], rng_seed=1, rng_offset=2)
        fd.add_output(fd.ops.add(x, row))
    (got,) = run_via_plan(fd.fusion, [np.zeros((5, 7), np.float32)])
    assert np.array_equal(got, np.broadcast_to(got[:1], got.shape))
    assert len(np.unique(got[0])) == 7


def test_draws_without_a_seed_take_the_next_offset_of_the_process_stream():
    """Each call draws new numbers (two dropout masks differ); manual_seed replays them;
    replayed() runs at a given point and leaves the caller's stream where it was."""
    fd = random_fusion("uniform", DataType.Float, seeded=False)
    x = np.ones((16, 16), np.float32)
    tunefuse.manual_seed(123)
    first, second = reference.run(fd, [x])[0], reference.run(fd, [x])[0]
    assert not np.array_equal(first, second)
    tunefuse.manual_seed(123)
    assert np.array_equal(reference.run(fd, [x])[0], first)
    where = rng.state()
    with rng.replayed(123, 0):
        assert np.array_equal(reference.run(fd, [x])[0], first)
    assert rng.state() == where
    assert np.array_equal(reference.run(fd, [x])[0], second)
    # The plan draws at each call too (the executor evaluates the state node per call).
    tunefuse.manual_seed(123)
    assert np.array_equal(run_via_plan(fd.fusion, [x])[0], first)


def test_two_unseeded_draws_in_one_fusion_differ():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.uniform(0.0, 1.0, x.shape()))
        fd.add_output(fd.ops.uniform(0.0, 1.0, x.shape()))
    a, b = reference.run(fd, [np.zeros(64, np.float32)])
    assert not np.array_equal(a, b)


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda fd, x: fd.ops.uniform(0.0, 1.0, [2], rng_seed=1),
            "rng_seed and rng_offset together",
        ),
        (
            lambda fd, x: fd.ops.normal(0.0, 1.0, [2], dtype=DataType.Int),
            "dtype int64 is not floating",
        ),
        (lambda fd, x: fd.ops.uniform(True, 1.0, [2]), "must be a number, got bool"),
        (
            lambda fd, x: fd.ops.uniform(0.0, 1.0, [2], rng_seed=1.5, rng_offset=0),
            "must be an integer scalar",
        ),
        (lambda fd, x: fd.ops.uniform(0.0, 1.0, [-2]), "dim 0 of the shape is -2"),
    ],
)
def test_bad_draws_are_refused_by_name(build, message):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        with pytest.raises((DefinitionError, tunefuse.ShapeError), match=message):
            build(fd, x)
        fd.add_output(x)


def test_printed_and_serialized_draws_round_trip():
    for seeded in (True, False):
        fd = random_fusion("normal", DataType.BFloat16, seeded=seeded)
        text = str(fd)
        assert ("rng_seed=" in text) is seeded and "rng_state" not in text
        scope: dict = {}
        exec(text, scope)  # noqa: S102 - the printed definition is meant to be run
        assert scope["fd"].fusion.fusion_id == fd.fusion.fusion_id
        assert fusion_from_json(fd.fusion.to_json()).fusion_id == fd.fusion.fusion_id


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", ["uniform", "normal"])
@pytest.mark.parametrize("dtype", FLOATING)
def test_random_kernels_compile(op, dtype, arch):
    fd = random_fusion(op, dtype, seeded=dtype is not DataType.Half)
    inputs = [np.zeros((64, 96), np.float32)] + ([1, 2] if dtype is not DataType.Half else [])
    assert compile_plan(fd.plan(inputs), arch)


def test_rand_like_and_randn_like_draw_in_the_shape_and_dtype_of_a_tensor():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.rand_like(x, rng_seed=3, rng_offset=4))
        fd.add_output(fd.ops.randn_like(x))
    with FusionDefinition() as bad:
        i = bad.define_tensor(shape=[-1], dtype=DataType.Int)
        with pytest.raises(DefinitionError, match="rand_like: draws floating values"):
            bad.ops.rand_like(i)
        bad.add_output(i)
    u, n = reference.run(fd, [np.zeros((64, 100), DataType.BFloat16.numpy)])
    assert u.shape == n.shape == (64, 100) and u.dtype == n.dtype == DataType.BFloat16.numpy
    with FusionDefinition() as ref:
        y = ref.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        ref.add_output(
            ref.ops.uniform(0.0, 1.0, y.shape(), dtype=DataType.BFloat16, rng_seed=3, rng_offset=4)
        )
    np.testing.assert_array_equal(
        u, reference.run(ref, [np.zeros((64, 100), DataType.BFloat16.numpy)])[0]
    )
    assert abs(float(n.astype(np.float32).std()) - 1.0) < 0.05
