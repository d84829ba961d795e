"""GPU: uniform and normal draw what the reference draws (uniform bit for bit, normal within
CUDA's libm), whatever the schedule; unseeded draws take the process stream; nvFuser's own
test_uniform / test_normal statistics and a dropout."""

import numpy as np
import pytest
from fuzz import random_params
from test_gpu_execute import to_host, torch_or_skip
from test_random import FLOATING, random_fusion

import tunefuse
from tunefuse import DataType, FusionDefinition, reference
from tunefuse.runtime.device import runtime
from tunefuse.runtime.executor import Executor

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("op", ["uniform", "normal"])
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape", [(3, 5), (257, 1031), (64, 4096)])
def test_draws_match_the_reference(op, dtype, shape, rng):
    torch = torch_or_skip()
    fd = random_fusion(op, dtype)
    x = rng.standard_normal(shape).astype(np.float32)
    seed, offset = 2**35 + 17, 9
    got = [to_host(t) for t in fd.execute([torch.from_numpy(x).cuda(), seed, offset])]
    want = reference.run(fd, [x, seed, offset])
    for g, w in zip(got, want, strict=True):
        if op == "uniform":
            np.testing.assert_array_equal(g, w)
        else:  # logf/cosf against NumPy's: a few ulp
            tol = {DataType.Double: 1e-12, DataType.Float: 1e-5}.get(dtype, 1e-2)
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol * 4
            )


@pytest.mark.parametrize("op", ["uniform", "normal"])
def test_the_schedule_does_not_change_the_numbers(op, rng):
    """Every valid vector width and block size draws the same numbers: a tuned kernel
    computes what the default does."""
    torch = torch_or_skip()
    fd = random_fusion(op, DataType.Float)
    x = torch.from_numpy(rng.standard_normal((128, 1000)).astype(np.float32)).cuda()
    default = [to_host(t) for t in fd.execute([x, 5, 6])]
    (seg,) = fd.plan([x, 5, 6]).segments
    device = runtime(0).info
    tried = set()
    for seed in range(12):
        params = random_params(seg, device, seed)
        if params is None or params in tried:
            continue
        tried.add(params)
        exe = Executor(fd.fusion, params_source=lambda s, d, p=params: p)
        got = [to_host(t) for t in exe.run([x, 5, 6])]
        for g, d in zip(got, default, strict=True):
            np.testing.assert_array_equal(g, d)
    assert len(tried) >= 4


def test_unseeded_draws_take_the_process_stream():
    torch = torch_or_skip()
    fd = random_fusion("uniform", DataType.Float, seeded=False)
    x = torch.ones(64, 64, device="cuda")
    tunefuse.manual_seed(5)
    first, second = (to_host(fd.execute([x])[0]) for _ in range(2))
    assert not np.array_equal(first, second)
    tunefuse.manual_seed(5)
    assert np.array_equal(to_host(fd.execute([x])[0]), first)
    with tunefuse.rng.replayed(5, 0):
        assert np.array_equal(reference.run(fd, [x.cpu().numpy()])[0], first)
    fd.validate([x])  # the reference replays the draw the run makes


def test_nvfusers_uniform_and_normal_statistics():
    """nvFuser's test_uniform and test_normal: [64, 128, 1024] draws, no seed given."""
    torch = torch_or_skip()
    x = torch.randn(64, 128, 1024, device="cuda")
    with FusionDefinition() as fd:
        t0 = fd.from_pytorch(x)
        fd.add_output(
            fd.ops.uniform(
                fd.define_scalar(1.8), fd.define_scalar(1223.5), t0.shape(), dtype=DataType.Float
            )
        )
        fd.add_output(
            fd.ops.normal(
                fd.define_scalar(3.7), fd.define_scalar(2.5), t0.shape(), dtype=DataType.Double
            )
        )
    u, n = fd.execute([x])
    assert u.shape == x.shape and n.dtype == torch.float64
    assert 1.8 <= u.min().item() and u.max().item() < 1223.5
    assert abs(u.mean().item() - (1.8 + 1223.5) / 2) < 1.0
    assert abs(n.mean().item() - 3.7) < 1e-2 and abs(n.std().item() - 2.5) < 1e-2


def test_dropout_keeps_each_element_with_its_probability(rng):
    """softmax-free dropout: x * (u < 0.9) / 0.9, the mask an output too."""
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        u = fd.ops.uniform(
            0.0,
            1.0,
            x.shape(),
            dtype=DataType.Float,
            rng_seed=fd.define_scalar(DataType.Int),
            rng_offset=fd.define_scalar(DataType.Int),
        )
        keep = fd.ops.lt(u, 0.9)
        y = fd.ops.mul(
            fd.ops.mul(fd.ops.cast(x, DataType.Float), fd.ops.cast(keep, DataType.Float)), 1 / 0.9
        )
        fd.add_output(fd.ops.cast(y, DataType.BFloat16))
        fd.add_output(keep)
    host = rng.standard_normal((2048, 4096)).astype(np.float32)
    x = torch.from_numpy(host).cuda().bfloat16()
    out, keep = fd.execute([x, 1234, 0])
    assert abs(keep.float().mean().item() - 0.9) < 2e-3
    want_out, want_keep = reference.run(
        fd, [x.cpu().float().numpy().astype(DataType.BFloat16.numpy), 1234, 0]
    )
    np.testing.assert_array_equal(to_host(keep), want_keep)
    np.testing.assert_array_equal(to_host(out).astype(np.float32), want_out.astype(np.float32))
