"""GPU: kernels compute what the reference computes (run with `pytest -m gpu` on a GPU)."""

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for
from hypothesis import HealthCheck, given, settings
from strategies import fusions
from test_frontend import ROOT, _seed_script

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.fusion_file import load_fusion_file
from tunefuse.ir.elementwise import ELEMENTWISE, ResultType

pytestmark = pytest.mark.gpu

TOL = {
    DataType.Double: (1e-9, 1e-9),
    DataType.Float: (2e-5, 2e-5),
    DataType.Half: (2e-3, 2e-3),
    DataType.BFloat16: (2e-2, 2e-2),
    DataType.Int: (0, 0),
    DataType.Int32: (0, 0),
    DataType.Bool: (0, 0),
}


def torch_or_skip():
    return pytest.importorskip("torch")


def to_device(arrays):
    torch = torch_or_skip()
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            if a.dtype == DataType.BFloat16.numpy:
                out.append(torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).cuda())
            else:
                # (np.ascontiguousarray makes a 0-dim array 1-dim: copy keeps its rank)
                out.append(torch.from_numpy(np.array(a, order="C")).cuda())
        else:
            out.append(a)
    return out


def to_host(t):
    torch = torch_or_skip()
    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bfloat16:
            return t.float().cpu().numpy().astype(DataType.BFloat16.numpy)
        return t.cpu().numpy()
    if hasattr(t, "numpy"):
        return t.numpy()
    return np.asarray(t)


def assert_agrees(fd, inputs, got, dtype):
    """`got` (host arrays) equals the reference's outputs of `fd` on `inputs`: same shapes
    and types, values within 4x the tolerance of the coarser of the output's and `dtype`."""
    from tunefuse import reference

    for g, e in zip(got, reference.run(fd.fusion, inputs), strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        out_dtype = next(d for d in DataType if d.numpy == e.dtype)
        rtol, atol = max(TOL[out_dtype], TOL[dtype])
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=rtol * 4, atol=atol * 4
        )


def check(fd, inputs, tol_scale=1.0, at_least=DataType.Double):
    """Compare with the reference at the tolerance of the output dtype (or of `at_least`,
    the least precise type the fusion computes in, when that is coarser)."""
    expected = reference.run(fd.fusion, inputs)
    got = fd.execute(to_device(inputs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = to_host(g)
        assert g.shape == e.shape and g.dtype == e.dtype
        dtype = next(d for d in DataType if d.numpy == e.dtype)
        rtol, atol = max(TOL[dtype], TOL[at_least])
        np.testing.assert_allclose(
            g.astype(np.float64),
            e.astype(np.float64),
            rtol=rtol * tol_scale,
            atol=atol * tol_scale,
            equal_nan=True,
        )


@pytest.mark.parametrize("op", sorted(o.value for o in ELEMENTWISE))
def test_every_elementwise_op(op, rng):
    from tunefuse.ir.ops import OpKind

    kind = OpKind(op)
    rule = ELEMENTWISE[kind]
    dtype = (
        DataType.Int32
        if rule.result in (ResultType.INTEGRAL, ResultType.INTEGER)
        else DataType.Float
    )
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        y = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        args = {
            1: (x,),
            2: (x, y),
            3: ((fd.ops.gt(x, y), x, y) if op == "where" else (x, y, x)),
            4: (x, y, x, 0.5),
        }[rule.arity]
        fd.add_output(getattr(fd.ops, op)(*args))
    if dtype.is_integral:
        a, b = rng.integers(-50, 50, (2, 33, 17)).astype(
            np.int32
        )  # shifts by amounts outside [0, 32) too
    else:
        a, b = rng.uniform(0.1, 3.0, (2, 33, 17)).astype(np.float32)
    check(fd, [a, b], tol_scale=10)


@pytest.mark.parametrize(
    "dtype",
    [DataType.Float, DataType.Half, DataType.BFloat16, DataType.Double],
    ids=lambda d: d.value,
)
@pytest.mark.parametrize("name", sorted(ZOO))
@pytest.mark.parametrize("rows, cols", [(64, 96), (7, 1000), (1000, 3), (1, 1), (300, 4096)])
def test_every_scheduler(name, dtype, rows, cols, rng):
    fd = build(ZOO[name], dtype)
    compute = DataType.Float if name not in ("row_sum", "col_sum", "transpose2d") else dtype
    check(
        fd,
        inputs_for(fd, rows, cols, rng),
        tol_scale=10 if name in ("row_sum", "col_sum") else 2,
        at_least=compute,
    )


@pytest.mark.parametrize(
    "name", [c.name for c in load_fusion_file(ROOT / "examples" / "seed_fusions.py")]
)
def test_seed_fusions(name, rng):
    case = {c.name: c for c in load_fusion_file(ROOT / "examples" / "seed_fusions.py")}[name]
    check(case.build(), case.example_inputs(rng))


@pytest.mark.parametrize("script", ["transpose_views.py", "gelu_views.py", "gelu_no_views.py"])
def test_seed_repro_scripts_run_with_only_the_import_changed(script):
    torch_or_skip()
    scope = {}
    exec(compile(_seed_script(script), script, "exec"), scope)
    out = scope["out"]
    assert isinstance(out, list) and out[0].is_cuda


def test_host_numpy_inputs_come_back_as_numpy(rng):
    fd = build(ZOO["bias_gelu"], DataType.Float)
    inputs = inputs_for(fd, 5, 7, rng)
    (out,) = fd.execute(inputs)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, reference.run(fd.fusion, inputs)[0], rtol=1e-5, atol=1e-6)


def test_own_device_arrays_and_cupy(rng):
    cupy = pytest.importorskip("cupy")
    fd = build(ZOO["softmax"], DataType.Float)
    x = rng.standard_normal((33, 65)).astype(np.float32)
    (out,) = fd.execute([cupy.asarray(x)])
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_allclose(
        cupy.asnumpy(out), reference.run(fd.fusion, [x])[0], rtol=1e-5, atol=1e-6
    )


def test_own_device_arrays_go_to_torch_through_dlpack(rng):
    """Inputs that are neither torch nor CuPy get tunefuse's DeviceArray back, which torch
    (or anyone) takes over DLPack without a copy."""
    torch = torch_or_skip()
    from tunefuse.runtime.device_array import DeviceArray

    class InterfaceOnly:
        def __init__(self, tensor):
            self.tensor = tensor
            self.__cuda_array_interface__ = tensor.__cuda_array_interface__

    fd = build(ZOO["softmax"], DataType.Float)
    x = rng.standard_normal((33, 65)).astype(np.float32)
    (out,) = fd.execute([InterfaceOnly(torch.from_numpy(x).cuda())])
    assert isinstance(out, DeviceArray)
    shared = torch.from_dlpack(out)
    assert shared.shape == (33, 65) and shared.data_ptr() == out.data_ptr
    np.testing.assert_allclose(
        shared.cpu().numpy(), reference.run(fd.fusion, [x])[0], rtol=1e-5, atol=1e-6
    )
    shared.zero_()
    torch.cuda.synchronize()
    assert not out.numpy().any()  # one memory, two names
    del out
    assert float(shared.sum()) == 0.0  # the capsule kept the memory alive


def test_non_contiguous_broadcast_size1_and_empty(rng):
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[False, False])
        y = fd.define_tensor(shape=[1, -1])
        fd.add_output(fd.ops.mul(fd.ops.exp(x), y))
    a = torch.randn(40, 30, device="cuda")[::2, ::3]
    b = torch.randn(1, 10, device="cuda")
    (out,) = fd.execute([a, b])
    torch.testing.assert_close(out, torch.exp(a) * b)
    (out,) = fd.execute([torch.randn(0, 10, device="cuda"), b])
    assert out.shape == (0, 10)
    (out,) = fd.execute([torch.randn(1, 1, device="cuda"), torch.randn(1, 1, device="cuda")])
    assert out.shape == (1, 1)


def test_int64_indexing(rng):
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Half)
        fd.add_output(fd.ops.neg(fd.ops.slice(x, [2**31 - 8], [2**31 + 8], [1])))
    n = 2**31 + 16
    a = torch.arange(n, device="cuda", dtype=torch.float32).to(torch.float16)
    plan = fd.plan([a])
    assert plan.segments[0].index_type == "int64"
    (out,) = fd.execute([a])
    torch.testing.assert_close(out, -a[2**31 - 8 : 2**31 + 8])
    del a


def test_in_place_and_preallocated_outputs_poisoned_first(rng):
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.mul(x, 2.0), alias_input=x)
        fd.add_output(fd.ops.exp(x))
    a = torch.randn(17, 33, device="cuda")
    before = a.clone()
    poisoned = torch.full((17, 33), float("nan"), device="cuda")
    (out,) = fd.execute([a], out=[poisoned])
    assert out is poisoned
    torch.testing.assert_close(out, torch.exp(before))
    torch.testing.assert_close(a, before * 2)
    # Preallocated into a transposed buffer.
    t = torch.full((33, 17), float("nan"), device="cuda").t()
    (out,) = fd.execute([a], out=[t])
    torch.testing.assert_close(out, torch.exp(before * 2))


def test_illegal_in_place_aliasing_made_safe_on_gpu():
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[64, 64])
        fd.add_output(fd.ops.permute(fd.ops.neg(x), dims=[1, 0]), alias_input=x)
    a = torch.randn(64, 64, device="cuda")
    expect = -a.t()
    fd.execute([a])
    torch.testing.assert_close(a, expect)


def test_views_only_run_no_kernel_and_alias_the_input():
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.permute(fd.ops.reshape(x, new_shape=[4, -1]), dims=[1, 0]))
    a = torch.randn(8, 6, device="cuda")
    (out,) = fd.execute([a])
    assert out.data_ptr() == a.data_ptr()
    torch.testing.assert_close(out, a.reshape(4, -1).t())


@given(fusions(max_ops=6))
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_random_fusions(case):
    fd, inputs = case
    check(fd, inputs, tol_scale=20)


@pytest.mark.parametrize("rows, cols", [(64, 96), (7, 1000), (33, 4096)])
def test_values_kept_across_passes(rows, cols, rng):
    """A cached row keeps exp(x - max) and tanh(x) in registers for the output pass."""
    from fusion_zoo import shared_costly_values

    for dtype in (DataType.Float, DataType.BFloat16):
        fd = build(shared_costly_values, dtype)
        check(fd, inputs_for(fd, rows, cols, rng), tol_scale=2, at_least=DataType.Float)


@pytest.mark.parametrize("name", sorted(ZOO))
@pytest.mark.parametrize("rows, cols", [(64, 96), (7, 1000), (300, 4096)])
def test_static_shape_kernels(name, rows, cols, rng):
    """A kernel with its sizes, strides and offsets as constants computes what the reference does."""
    from test_tuning_space import static_shape_params

    from tunefuse.runtime.executor import Executor
    from tunefuse.schedulers import scheduler_for

    fd = build(ZOO[name], DataType.Float)
    inputs = inputs_for(fd, rows, cols, rng)
    executor = Executor(
        fd.fusion,
        params_source=lambda seg, device: static_shape_params(
            seg, scheduler_for(seg.scheduler).default_params(seg, device)
        ),
    )
    got = executor.run(to_device(inputs))
    launched = [
        r.launch.params for exe in executor.plans.values() for r in exe.recipes if r.launch.numel
    ]
    assert launched and all(
        p.get("static_shape") or p.get("pointwise", {}).get("static_shape") for p in launched
    )
    for g, e in zip(got, reference.run(fd.fusion, inputs)):
        np.testing.assert_allclose(
            to_host(g).astype(np.float64), e.astype(np.float64), rtol=1e-4, atol=1e-4
        )


def test_a_reduction_over_an_empty_dim_writes_every_output_element():
    """torch's values of nothing (sum 0, prod 1, mean and var NaN), not the uninitialized memory
    of a reduction kernel that is never launched over its empty space."""
    torch = torch_or_skip()
    from test_plan import empty_reductions_fusion

    fd = empty_reductions_fusion()
    x = torch.zeros(4, 0, 6, device="cuda")
    got = fd.execute([x])
    var, mean = torch.var_mean(x, dim=1, correction=0)
    want = [
        x.sum(1),
        x.prod(1, keepdim=True),
        x.mean((0, 1)),
        x.var(1, correction=1),
        var + mean,
        x / x.sum(1, keepdim=True),
    ]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("correction", [0, 1])
def test_var_mean_over_a_dim_of_one_is_torchs(correction):
    """Elementwise (the squared deviation of an element from itself over 1 - correction): 0,
    or NaN for correction 1 and for a non-finite element, as torch.var_mean; a layernorm over
    a dim of one is 0 * rsqrt(eps) + bias."""
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        var, mean = fd.ops.var_mean(xf, dims=[1], correction=correction, keepdim=True)
        fd.add_output(fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5))))
        fd.add_output(var)
    x = torch.randn(70000, 1, device="cuda").to(torch.bfloat16)
    x[:3, 0] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    normed, got_var = fd.execute([x])
    want_var, want_mean = torch.var_mean(x.float(), dim=1, correction=correction, keepdim=True)
    torch.testing.assert_close(got_var, want_var, equal_nan=True, rtol=0, atol=0)
    want = (x.float() - want_mean) * torch.rsqrt(want_var + 1e-5)
    torch.testing.assert_close(normed, want, equal_nan=True, rtol=0, atol=0)


def test_the_generated_hot_path_runs_the_repeat_call_and_misses_to_the_general_one():
    """The third call of one signature runs through runtime.specialized's generated code;
    another shape, an offset (misaligned) view or CPU tensors (CPU tensors back) miss it and
    are still right, and the first signature's generated call is taken again after them."""
    torch = torch_or_skip()
    fd = build(ZOO["bias_gelu"], DataType.Float)

    def check(inputs: list) -> None:
        (got,) = fd.execute(inputs)
        assert got.device == inputs[0].device
        want = reference.run(fd, [t.cpu().numpy() for t in inputs])[0]
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5, atol=1e-6)

    x, b = torch.randn(64, 96, device="cuda"), torch.randn(96, device="cuda")
    for _ in range(3):
        check([x, b])
    runner = fd._runner
    hot = runner.hot
    assert hot is not None and "empty_like" in hot.source and "launch(F0" in hot.source
    others = [
        [torch.randn(8, 96, device="cuda"), b],
        [torch.randn(64 * 96 + 1, device="cuda")[1:].view(64, 96), b],
        [x.cpu(), b.cpu()],
    ]
    for inputs in others:
        assert hot(inputs) is None
        for _ in range(3):
            check(inputs)
    check([x, b])
    assert runner.hot is hot  # kept per signature, not generated again


def test_a_repeat_call_whose_kernel_takes_an_extent_as_a_scalar():
    """A kernel scalar that is neither an input nor host-computed (an extent, `x.size(0)`)
    on the fast path: the repeat call used to skip working the scalars out (TypeError; the
    corpus found it once it ran each case three times)."""
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.abs(x), x.size(0)))
    t = torch.randn(8, device="cuda")
    for _ in range(3):
        (got,) = fd.execute([t])
        torch.testing.assert_close(got, t.abs() * 8)
    u = torch.randn(5, device="cuda")
    (got,) = fd.execute([u])
    torch.testing.assert_close(got, u.abs() * 5)
