"""GPU: nvFuser's definition and execute features against the reference: expanded broadcast
inputs (torch's expand: stride 0) in pointwise and reduction kernels, `validate`, and
`execute(profile=, print_repro=, capture_debug_output=)`."""

import numpy as np
import pytest
from test_gpu_execute import to_host, torch_or_skip

from tunefuse import DataType, FusionDefinition, InputMismatchError, reference

pytestmark = pytest.mark.gpu


def _expanded_fusion():
    """[a, b, c] (the middle dim expanded) times [a, b, c], summed over the expanded dim."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(
            shape=[-1, -1, -1], contiguity=[True, None, True], dtype=DataType.Float
        )
        y = fd.define_tensor(
            shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float
        )
        p = fd.ops.mul(x, y)
        fd.add_output(p)
        fd.add_output(fd.ops.sum(p, dims=[1]))
        fd.add_output(fd.ops.sum(x, dims=[1]))
    return fd


@pytest.mark.parametrize("shape", [(4, 5, 6), (3, 1000, 33), (64, 7, 512)])
def test_expanded_inputs_compute_what_the_reference_computes(shape, rng):
    torch = torch_or_skip()
    a, b, c = shape
    fd = _expanded_fusion()
    base = torch.randn(a, 1, c, device="cuda")
    x = base.expand(a, b, c)
    y = torch.randn(a, b, c, device="cuda")
    got = [to_host(t) for t in fd.execute([x, y])]
    host_x = np.broadcast_to(base.cpu().numpy(), shape)  # x.cpu() would copy: stride 0 lost
    expected = reference.run(fd.fusion, [host_x, y.cpu().numpy()])
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
    fd.validate([x, y])


def test_validate_runs_and_compares_with_the_reference_or_given_outputs(rng):
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.sum(fd.ops.cast(t, DataType.Float), dims=[1]))
    x = torch.randn(33, 1000, device="cuda").to(torch.bfloat16)
    fd.validate([x])
    fd.validate([x], reference_outputs=[x.float().sum(1)])
    with pytest.raises(AssertionError, match="output 0"):
        fd.validate([x], reference_outputs=[x.float().sum(1) + 1])


def test_profile_times_the_call_and_lists_its_kernels(rng):
    torch = torch_or_skip()
    fd = _expanded_fusion()
    x = torch.randn(8, 1, 64, device="cuda").expand(8, 16, 64)
    y = torch.randn(8, 16, 64, device="cuda")
    fd.execute([x, y], profile=True)
    prof = fd.profile()
    assert prof.wall_us > 0 and prof.device == 0 and prof.kernels
    assert all(k.name.startswith("tf_") and all(k.grid) and all(k.block) for k in prof.kernels)
    fd.execute([x, y], capture_debug_output=True)
    assert prof.kernels[0].name in fd.get_debug_output()


def test_print_repro_prints_a_script_that_reproduces_the_call(rng, capsys):
    torch = torch_or_skip()
    fd = _expanded_fusion()
    x = torch.randn(2, 1, 8, device="cuda").expand(2, 3, 8)
    y = torch.randn(2, 3, 8, device="cuda")
    fd.execute([x, y], print_repro=True)
    script = capsys.readouterr().out
    namespace = {}
    exec(compile(script, "<repro>", "exec"), namespace)
    outputs, inputs = namespace["outputs"], namespace["inputs"]
    assert inputs[0].strides[1] == 0
    for g, e in zip(outputs, reference.run(fd.fusion, inputs), strict=True):
        np.testing.assert_allclose(to_host(g), e, rtol=1e-4, atol=1e-4)


def test_shape_vectors_and_vector_inputs_run(rng):
    """define_vector of scalar products and a define_vector(n) input, through execute (twice:
    the second call takes the plan cache's fast path) and validate."""
    from test_nvfuser_compat import _reshape_max_subtract

    torch = torch_or_skip()
    fd = _reshape_max_subtract()
    a, b = (torch.randn(4, 6, 8, 130, device="cuda") for _ in range(2))
    for _ in range(2):
        fd.validate([a, b])
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Float)
        shape = fd.define_vector(2)
        fd.add_output(fd.ops.sum(fd.ops.reshape(t0, shape), dims=[1]))
    x = torch.randn(16, 32, 64, device="cuda")
    for new_shape in ([512, 64], (512, 64), [16, 2048], [16, 2048]):
        (got,) = fd.execute([x, new_shape])
        torch.testing.assert_close(got, x.reshape(new_shape).sum(1), rtol=1e-4, atol=1e-4)


def test_a_cpu_scalar_tensor_broadcasts_against_gpu_tensors():
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=True)
        fd.add_output(fd.ops.add(fd.ops.mul(t, s), s))
    x = torch.randn(64, 96, device="cuda", dtype=torch.bfloat16)
    for value in (2.0, -0.5):
        scale = torch.tensor(value)
        (got,) = fd.execute([x, scale])
        torch.testing.assert_close(got, x * scale + scale)
    with pytest.raises(InputMismatchError, match="got an array on the GPU"):
        fd.execute([x, torch.tensor(1.0, device="cuda")])


def test_stride_ordered_outputs_come_back_in_that_layout(rng):
    from test_nvfuser_compat import _stride_ordered_outputs

    torch = torch_or_skip()
    fd = _stride_ordered_outputs()
    x = torch.randn(40, 70, 130, device="cuda")
    for _ in range(2):  # the checked path, then the fast one
        relu, neg, exp = fd.execute([x])
        torch.testing.assert_close(relu, torch.relu(x))
        torch.testing.assert_close(neg, -x)
        torch.testing.assert_close(exp, torch.exp(x))
        assert relu.stride() == (1, 40 * 130, 40) and neg.stride() == (70 * 130, 1, 70)
        assert exp.is_contiguous()


# -- answers nvFuser's tests caught wrong ----------------------------------------------------


def test_an_output_written_in_place_and_returned_is_that_input():
    """nvFuser's returning_aliased_outputs: every returned T4 is the input itself; T0 returned
    is T0 as passed in (nvFuser returns the written input there)."""
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], dtype=DataType.Float)
        t4 = fd.ops.where(fd.ops.gt(t0, 0.0), t0, 0.0)
        fd.add_output(t4)
        fd.add_output(t4, t0)
        fd.add_output(t4)
        fd.add_output(t0)
    x = torch.randn(1, 2, 3, 4, device="cuda")
    original, expected = x.clone(), x.clamp(min=0)
    out = fd.execute([x])
    assert len(out) == 3
    assert [o.data_ptr() == x.data_ptr() for o in out] == [True, True, False]
    torch.testing.assert_close(x, expected, rtol=0, atol=0)
    torch.testing.assert_close(out[2], original, rtol=0, atol=0)  # T0 as passed in


@pytest.mark.parametrize("example", [1, 2, 3, 4])
def test_issue_2664_in_place_updates_read_before_they_write(example, rng):
    """4M elements: a reduction split over many blocks, or a broadcast read by all of them,
    must see the input as it was before the in-place write."""
    from test_plan import _issue_2664, issue_2664_inputs

    torch = torch_or_skip()
    n = 4194304
    fd = _issue_2664(example, n)
    host = issue_2664_inputs(example, n, rng)
    expected = reference.run(fd.fusion, host, include_aliased=True)
    inputs = [torch.from_numpy(np.array(h, copy=True)).cuda() for h in host]
    got = [to_host(t) for t in fd.execute(inputs)]
    returned = [k for k, o in enumerate(fd.fusion.outputs) if o.alias_input is None]
    for k, g in zip(returned, got, strict=True):
        np.testing.assert_allclose(g, expected[k], rtol=1e-5, atol=1e-3)
    for k, o in enumerate(fd.fusion.outputs):
        if o.alias_input is not None:
            position = fd.fusion.inputs.index(o.alias_input)
            np.testing.assert_allclose(to_host(inputs[position]), expected[k], rtol=1e-4, atol=1e-2)


def test_integer_div_truncates_and_truediv_divides():
    """nvFuser's test_integer_division: div of int64 is torch.div(rounding_mode="trunc"),
    int64 again; truediv is true division; x / 0 is 0 (defined, where CUDA's is not)."""
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Int)
        fd.add_output(fd.ops.div(a, b))
        fd.add_output(fd.ops.truediv(a, b))
        fd.add_output(fd.ops.div(fd.ops.cast(a, DataType.Int32), fd.ops.cast(b, DataType.Int32)))
    a = torch.randint(-1000, 1000, (1024,), device="cuda")
    b = torch.randint(1, 50, (1024,), device="cuda") * (
        torch.randint(0, 2, (1024,), device="cuda") * 2 - 1
    )
    quotient, true, quotient32 = fd.execute([a, b])
    assert quotient.dtype == torch.int64 and quotient32.dtype == torch.int32
    torch.testing.assert_close(quotient, torch.div(a, b, rounding_mode="trunc"), rtol=0, atol=0)
    torch.testing.assert_close(
        quotient32, torch.div(a, b, rounding_mode="trunc").int(), rtol=0, atol=0
    )
    torch.testing.assert_close(true, torch.true_divide(a, b).float())
    edge_a = torch.tensor([7, -7, -(2**63), 5], device="cuda")
    edge_b = torch.tensor([0, 0, -1, -1], device="cuda")
    got = fd.execute([edge_a, edge_b])[0].cpu().tolist()
    assert got == [0, 0, -(2**63), -5]


def test_writing_in_place_into_an_expanded_input_is_refused():
    """Its elements share memory: every thread would write the one element all of them read."""
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[None, True])
        fd.add_output(fd.ops.add(x, 1.0), x)
    x = torch.zeros(5, device="cuda").expand(4, 5)
    with pytest.raises(InputMismatchError, match="overlap"):
        fd.execute([x])


@pytest.mark.parametrize("dtype", [DataType.Int, DataType.Int32])
def test_integer_ops_compute_what_the_reference_computes(dtype):
    """div, gcd, the three shifts (amounts outside [0, bits) included) and signbit."""
    from test_reference import INTEGER_CASES, integer_ops_fusion

    torch = torch_or_skip()
    fd = integer_ops_fusion(dtype)
    a, b = (x.astype(dtype.numpy) for x in INTEGER_CASES)
    got = fd.execute([torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()])
    for g, w in zip(got, reference.run(fd.fusion, [a, b]), strict=True):
        np.testing.assert_array_equal(to_host(g), w)


def test_signbit_and_nextafter_match_torch():
    """nvFuser's test_signbit, and nextafter in float and double."""
    torch = torch_or_skip()
    x, y = torch.randn(2, 3, 4, 5, device="cuda")
    x[0, 0, 0] = -0.0
    with FusionDefinition() as fd:
        t0, t1 = fd.from_pytorch(x), fd.from_pytorch(y)
        fd.add_output(fd.ops.where(fd.ops.signbit(t0), fd.ops.neg(fd.ops.abs(t1)), fd.ops.abs(t1)))
        fd.add_output(fd.ops.nextafter(t0, t1))
        fd.add_output(
            fd.ops.nextafter(fd.ops.cast(t0, DataType.Double), fd.ops.cast(t1, DataType.Double))
        )
    a, b, c = fd.execute([x, y])
    torch.testing.assert_close(
        a, torch.where(torch.signbit(x), -torch.abs(y), torch.abs(y)), rtol=0, atol=0
    )
    torch.testing.assert_close(b, torch.nextafter(x, y), rtol=0, atol=0)
    torch.testing.assert_close(c, torch.nextafter(x.double(), y.double()), rtol=0, atol=0)


def test_composite_ops_match_torch():
    """nvFuser's test_welford, and triu/select against torch."""
    torch = torch_or_skip()
    x = torch.randn(3, 40, 66, device="cuda")
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        mean, var_sum, n = fd.ops.welford(t, [-1])
        fd.add_output(fd.ops.div(var_sum, n))
        fd.add_output(mean)
        fd.add_output(fd.ops.triu(t, 3))
        fd.add_output(fd.ops.select(t, fd.define_scalar(7, dtype=DataType.Int), 1))
        fd.add_output(fd.ops.select(t, fd.define_scalar(dtype=DataType.Int), 2))
    var, mean, upper, picked, from_end = fd.execute([x, -3])
    want_var, want_mean = torch.var_mean(x, [-1], correction=0)
    torch.testing.assert_close(var, want_var)
    torch.testing.assert_close(mean, want_mean)
    torch.testing.assert_close(upper, torch.triu(x, 3), rtol=0, atol=0)
    torch.testing.assert_close(picked, x.select(1, 7), rtol=0, atol=0)
    torch.testing.assert_close(from_end, x.select(2, -3), rtol=0, atol=0)


@pytest.mark.parametrize("rows, cols", [(8, 16), (3, 1000), (700, 5)])
def test_scans_compute_what_the_reference_computes(rows, cols, rng):
    """nvFuser's test_cumsum/test_cumprod and cummax/cummin, along each dim."""
    from test_nvfuser_compat import scan_fusion, scan_inputs

    torch = torch_or_skip()
    fd = scan_fusion()
    inputs = scan_inputs(rng, rows, cols)
    got = fd.execute([torch.from_numpy(x).cuda() for x in inputs])
    for g, w in zip(got, reference.run(fd, inputs), strict=True):
        g = to_host(g)
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, equal_nan=True)
    x = torch.from_numpy(inputs[0]).cuda()
    torch.testing.assert_close(got[0], torch.cumsum(x, 0), rtol=1e-4, atol=1e-3, equal_nan=True)
    torch.testing.assert_close(got[3], torch.cummin(x, 0).values, rtol=0, atol=0, equal_nan=True)


def test_segments_run_in_turn_give_what_the_whole_definition_gives(rng):
    """nvFuser's `fd.segment(inputs)`: a row sum, then a product (a stride-ordered output)
    with its column sum plus a bias, and the bias plus one written into the bias in place
    (the plan's third kernel copies it in). Segmented, `execute` runs the two definitions
    one after another, the same three kernels between them."""
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        b = fd.define_tensor([-1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, [1]))
        y = fd.ops.segment_set(fd.ops.mul(x, x))
        fd.add_output(y, stride_order=[0, 1])
        fd.add_output(fd.ops.add(fd.ops.sum(y, [0]), b))
        fd.add_output(fd.ops.add(b, 1.0), alias_input=b)
    host = [rng.standard_normal((96, 70)).astype(np.float32), np.arange(70, dtype=np.float32)]
    want = reference.run(fd.fusion, host, include_aliased=True)
    whole = fd.execute([torch.from_numpy(a).cuda() for a in host])
    inputs = [torch.from_numpy(a).cuda() for a in host]
    segments = fd.segment(inputs)
    assert len(segments) == 2
    got = fd.execute(inputs)
    assert len(got) == len(whole) == 3
    assert got[1].stride() == (1, 96)  # handed on in its stride order
    for g, w in zip(got, want[:3]):
        np.testing.assert_allclose(to_host(g), w, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(to_host(inputs[1]), want[3])  # b + 1, written into b
    kernels = [[len(exe.recipes) for exe in s._runner.plans.values()] for s in segments]
    assert kernels == [[1], [2]]  # each segment ran once; the in-place copy is the last's


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_matches_torch_scatter(dim):
    """nvFuser's scatter tests: src at topk's indices of a [128, 1024] tensor (64 of them
    along `dim`), then a sigmoid; a scalar src; an index out of range is an error by name."""
    torch = torch_or_skip()
    from tunefuse.errors import IndexOutOfRangeError

    x = torch.randn(128, 1024, device="cuda")
    _, index = torch.topk(x, k=64, dim=dim)
    src = torch.randn(index.shape, device="cuda")
    with FusionDefinition() as fd:
        t0 = fd.from_pytorch(x)
        t1 = fd.from_pytorch(index)
        t2 = fd.from_pytorch(src)
        fd.add_output(fd.ops.sigmoid(fd.ops.scatter(t0, t1, t2, dim)))
    (got,) = fd.execute([x, index, src])
    torch.testing.assert_close(got, torch.sigmoid(torch.scatter(x, dim, index, src)))
    with FusionDefinition() as fd:
        t0 = fd.from_pytorch(x)
        t1 = fd.from_pytorch(index)
        fd.add_output(fd.ops.scatter(t0, t1, fd.define_scalar(dtype=DataType.Double), dim))
    (got,) = fd.execute([x, index, 1.5])
    torch.testing.assert_close(got, torch.scatter(x, dim, index, 1.5), rtol=0, atol=0)
    bad = index.clone()
    bad[3, 5] = x.shape[dim]
    with pytest.raises(
        IndexOutOfRangeError,
        match=rf"scatter's index check .*an index in T1 lies outside \[0, extent of dim {dim} "
        r"of T0\) \(found on the GPU",
    ):
        fd.execute([x, bad, 1.5])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_linear_and_matmul_match_torch(dtype):
    """nvFuser's test_linear layouts (input and weight row- or column-major: [M, K] or a
    transposed [K, M] view), with and without a bias, and a batched matmul with a broadcast
    batch dim; within the dtype's tolerance of torch (cuBLAS sums in another order)."""
    torch = torch_or_skip()
    tdtype = getattr(torch, dtype)
    m, n, k = 24, 40, 96
    inp = torch.randn(m, k, device="cuda", dtype=tdtype)
    wt = torch.randn(n, k, device="cuda", dtype=tdtype)
    layouts = {
        "mk_nk": (inp, wt),
        "mk_kn": (inp, wt.t().contiguous().t()),
        "km_nk": (inp.t().contiguous().t(), wt),
        "km_kn": (inp.t().contiguous().t(), wt.t().contiguous().t()),
    }
    bias = torch.randn(n, device="cuda", dtype=tdtype)
    tol = {"rtol": 1.6e-2, "atol": 1e-1} if dtype == "bfloat16" else {"rtol": 1e-4, "atol": 1e-4}
    for name, (x, w) in layouts.items():
        for b in (None, bias):
            with FusionDefinition() as fd:
                args = [fd.from_pytorch(t) for t in ((x, w) if b is None else (x, w, b))]
                fd.add_output(fd.ops.linear(*args))
            (got,) = fd.execute([x, w] if b is None else [x, w, b])
            want = torch.nn.functional.linear(
                x.float(), w.float(), None if b is None else b.float()
            )
            assert got.dtype == tdtype, name
            torch.testing.assert_close(got.float(), want, **tol)
    a = torch.randn(3, 1, 16, 32, device="cuda", dtype=tdtype)
    c = torch.randn(2, 32, 8, device="cuda", dtype=tdtype)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.matmul(fd.from_pytorch(a), fd.from_pytorch(c)))
    (got,) = fd.execute([a, c])
    torch.testing.assert_close(got.float(), torch.matmul(a.float(), c.float()), **tol)


@pytest.mark.parametrize("how", ["input", "static input", "broadcast_in_dim", "expand"])
def test_squeeze_expanded_of_a_broadcast_dim_runs_as_the_reference(how, rng):
    """squeeze(squeeze_expanded=True) of a broadcast dim of extent 3: the first element along
    it (an expanded input: torch's expand, stride 0)."""
    from test_nvfuser_compat import _expanded_dim_squeezed

    torch = torch_or_skip()
    with FusionDefinition() as fd:
        _expanded_dim_squeezed(fd, how)
    x = torch.randn(5, 56, device="cuda")
    arg = x.unsqueeze(0).expand(3, 5, 56) if how in ("input", "static input") else x
    (got,) = fd.execute([arg])
    np.testing.assert_allclose(to_host(got), x.cpu().numpy() * 2, rtol=1e-6)


def test_a_manually_padded_cat_runs_as_the_reference(rng):
    from test_nvfuser_compat import manually_padded_cat

    torch = torch_or_skip()
    with FusionDefinition() as fd:
        manually_padded_cat(fd)
    a, b = torch.randn(33, 3, device="cuda"), torch.randn(33, 5, device="cuda")
    (got,) = fd.execute([a, b])
    np.testing.assert_array_equal(to_host(got), torch.cat([a, b], 1).cpu().numpy())


# -- spellings and semantics nvFuser's frontend tests use ------------------------------------


def _unseeded_uniform(seeded: bool):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        lo, hi = fd.define_scalar(0.3, DataType.Float), fd.define_scalar(1.7, DataType.Float)
        extra = {}
        if seeded:
            extra = dict(
                rng_seed=fd.define_scalar(DataType.Int), rng_offset=fd.define_scalar(DataType.Int)
            )
        fd.add_output(fd.ops.mul(t, fd.ops.uniform(lo, hi, shape=[5, 9], **extra)))
    return fd


def test_unseeded_draws_follow_torchs_generator():
    """torch.manual_seed(s) makes the draws reproducible, and the k-th draw after it is the
    draw given rng_seed=s, rng_offset=k (nvFuser's test_deterministic_random)."""
    torch = torch_or_skip()
    x = torch.randn(5, 9, device="cuda")
    stochastic, seeded = _unseeded_uniform(False), _unseeded_uniform(True)
    for seed in (0, 12345, 2**62 + 7):
        torch.manual_seed(seed)
        draws = [stochastic.execute([x])[0] for _ in range(4)]
        for k, got in enumerate(draws):
            torch.testing.assert_close(got, seeded.execute([x, seed, k])[0], rtol=0, atol=0)
        assert not torch.equal(draws[0], draws[1])
    torch.manual_seed(3)
    first = stochastic.execute([x])[0]
    torch.manual_seed(3)
    torch.testing.assert_close(stochastic.execute([x])[0], first, rtol=0, atol=0)


def test_a_call_without_arrays_returns_torch_tensors():
    torch = torch_or_skip()
    with FusionDefinition() as fd:
        s = fd.define_scalar(DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.full([2, 3], fd.define_scalar(1.0), DataType.Float), s))
        fd.add_output(fd.ops.iota(fd.define_scalar(4), dtype=DataType.Int))
    full, iota = fd.execute([2.5])
    assert isinstance(full, torch.Tensor) and full.is_cuda
    torch.testing.assert_close(full, torch.full((2, 3), 2.5, device="cuda"))
    torch.testing.assert_close(iota, torch.arange(4, device="cuda"))


def test_from_pytorch_takes_cuda_tensors_and_cpu_scalars():
    torch = torch_or_skip()
    x, scale = torch.randn(4, 5, device="cuda"), torch.tensor(3.0)
    with FusionDefinition() as fd:
        with pytest.raises(ValueError, match="a CPU tensor of shape \\[4, 5\\]"):
            fd.from_pytorch(x.cpu())
        fd.add_output(fd.ops.mul(fd.from_pytorch(x), fd.from_pytorch(scale)))
    torch.testing.assert_close(fd.execute([x, scale])[0], x * 3)


@pytest.mark.parametrize("dtype", [DataType.Half, DataType.BFloat16])
def test_uniform_in_a_narrow_dtype_stays_below_hi(dtype):
    """nvFuser's test_uniform_range: half and bfloat16 draws of [0, 1) reach the largest
    value below 1 and never 1 itself, the kernel's draws equal to the reference's."""
    torch_or_skip()
    with FusionDefinition() as fd:
        lo, hi = fd.define_scalar(0.0), fd.define_scalar(1.0)
        seed, offset = fd.define_scalar(DataType.Int), fd.define_scalar(DataType.Int)
        fd.add_output(
            fd.ops.uniform(lo, hi, shape=[1 << 22], rng_seed=seed, rng_offset=offset, dtype=dtype)
        )
    (got,) = fd.execute([11, 0])
    top = 0.99951171875 if dtype is DataType.Half else 0.99609375
    assert got.max().item() == top and got.min().item() >= 0.0
    np.testing.assert_array_equal(to_host(got), reference.run(fd.fusion, [11, 0])[0])


def test_index_select_of_a_0_dim_index_matches_torch():
    torch = torch_or_skip()
    x, i = torch.randn(8, 16, device="cuda"), torch.tensor(2, device="cuda")
    for dim in (0, 1):
        with FusionDefinition() as fd:
            fd.add_output(fd.ops.index_select(fd.from_pytorch(x), fd.from_pytorch(i), dim))
        torch.testing.assert_close(fd.execute([x, i])[0], torch.index_select(x, dim, i))


def test_contiguity_in_stride_order_binds_a_column_major_input_written_in_place():
    """nvFuser's test_inplace_update_on_non_contiguous_inputs: [2, 2] with strides (1, 3),
    declared contiguity [False, True] in stride order [0, 1]."""
    torch = torch_or_skip()
    x = torch.randn(5, device="cuda").as_strided((2, 2), (1, 3))
    expected = x.relu()
    with FusionDefinition() as fd:
        t = fd.define_tensor(
            shape=[2, 2], contiguity=[False, True], dtype=DataType.Float, stride_order=[0, 1]
        )
        r = fd.ops.set(fd.ops.where(fd.ops.gt(t, 0.0), t, 0.0))
        fd.add_output(r, t)
        fd.add_output(r)
    (out,) = fd.execute([x])
    torch.testing.assert_close(x, expected, rtol=0, atol=0)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
