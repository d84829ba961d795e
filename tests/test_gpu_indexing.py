"""GPU: index_select, gather, take_along_axis and embedding_fwd against the reference (torch
and NumPy inputs, fp32 and bf16, one element to thousands), torch's own embedding for every
combination of nvFuser's optional arguments, and an out-of-range index: a named error on
either launch path, nothing read there (tests/fuzz_corpus.py runs these ops under memcheck),
and the next run clean."""

import itertools

import numpy as np
import pytest
from test_gpu_execute import to_device, to_host, torch_or_skip
from test_indexing import CASES, build, case_inputs

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.errors import IndexOutOfRangeError

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=lambda d: d.value)
@pytest.mark.parametrize("n, m", [(1, 1), (7, 9), (33, 128), (1000, 256)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_indexing_computes_what_the_reference_computes(name, n, m, dtype, rng):
    fd = build(name, dtype)
    inputs = case_inputs(name, n, m, rng, dtype)
    expected = reference.run(fd.fusion, inputs)
    rtol, atol = dtype.tolerance
    for given in (to_device(inputs), inputs):
        got = [to_host(t) for t in fd.execute(given)]
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(
                g.astype(np.float64), e.astype(np.float64), rtol=4 * rtol, atol=4 * atol
            )


@pytest.mark.parametrize("name", sorted(set(CASES) - {"take_along_computed"}))
def test_an_out_of_range_index_raises_and_the_next_run_is_clean(name, rng):
    torch_or_skip()
    fd = build(name)
    bad = case_inputs(name, 40, 64, rng, out_of_range=True)
    good = case_inputs(name, 40, 64, rng)
    for convert in (to_device, lambda xs: xs):
        for _ in range(2):  # the second time through the plan cache's fast path
            with pytest.raises(
                IndexOutOfRangeError, match=r"\(defining T\d+\): an index in T\d+ lies outside"
            ):
                fd.execute(convert(bad))
            got = [to_host(t) for t in fd.execute(convert(good))]
            for g, e in zip(got, reference.run(fd.fusion, good), strict=True):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse",
    list(itertools.product([None, -2], [None, 1e-5], [None, 1.0], [None, True], [None, True])),
)
def test_embedding_fwd_matches_torch_for_every_optional_argument(
    padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
):
    """nvFuser's test_embedding: each optional argument absent or a scalar input."""
    torch = torch_or_skip()
    import torch.nn.functional as F  # noqa: N812

    given = [padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse]
    dtypes = [DataType.Int, DataType.Float, DataType.Float, DataType.Bool, DataType.Bool]
    with FusionDefinition() as fd:
        idx = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        weight = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        optional = [
            fd.define_scalar(dtype=dt) if g is not None else None for g, dt in zip(given, dtypes)
        ]
        fd.add_output(fd.ops.embedding_fwd(idx, weight, *optional))
    n, s = 10, 3
    index = torch.randint(n, (s,), dtype=torch.int64, device="cuda")
    w = torch.randn(n, s, dtype=torch.bfloat16, device="cuda")
    (out,) = fd.execute([index, w] + [g for g in given if g is not None])
    want = F.embedding(
        index,
        w.clone(),
        padding_idx,
        max_norm,
        2.0 if norm_type is None else norm_type,
        bool(scale_grad_by_freq),
        bool(sparse),
    )
    torch.testing.assert_close(out, want)
