"""GPU: a max and the sum of exp(x - max) computed in one pass (MAX_EXP_SUM,
planning/reductions.py) give what the reference's two passes give, in every layout that runs
them (rows, columns, a row split across blocks, a normalization re-reading its rows) and on
the rows where the running form could go wrong: -inf elements (alone, first, everywhere),
+inf, NaN, values far apart (a sum rescaled many times)."""

import numpy as np
import pytest
from fusion_zoo import logsumexp_over
from test_gpu_execute import assert_agrees
from test_gpu_split import run_with_reduction_params

from tunefuse import DataType, FusionDefinition
from tunefuse.planning.kernel_ir import SchedulerKind

pytestmark = pytest.mark.gpu


def softmax(fd: FusionDefinition, dtype: DataType) -> None:
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float) if dtype.itemsize < 4 else x
    e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, dims=[1], keepdim=True)))
    fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))


def with_edge_lines(x: np.ndarray, axis: int, rng: np.random.Generator) -> np.ndarray:
    """x with its first lines along `axis` (rows for axis 1, columns for axis 0) made of the
    values a running max-and-sum must survive."""
    x = np.array(x)
    lines = x if axis == 1 else x.T  # a view: writes go to x
    n = lines.shape[1]
    inf = np.inf
    edits = [
        lambda r: r.fill(-inf),  # every element -inf: NaN, as exp(-inf - -inf)
        lambda r: r.__setitem__(slice(0, n - 1), -inf),  # -inf, then one finite at the end
        lambda r: r.__setitem__(slice(0, n, 3), -inf),  # -inf among finite values
        lambda r: r.__setitem__(n // 2, inf),  # one +inf: NaN
        lambda r: r.__setitem__(n // 3, np.nan),  # one NaN: NaN
        lambda r: r.__setitem__(slice(None), np.linspace(-80, 80, n)),  # max grows all along
        lambda r: r.__setitem__(slice(None), np.linspace(80, -80, n)),  # max first
        lambda r: r.__setitem__(slice(None), rng.standard_normal(n) * 30),
    ]
    for k, edit in enumerate(edits[: lines.shape[0]]):
        row = lines[k].astype(np.float64)
        edit(row)
        lines[k] = row.astype(x.dtype)
    return x


CASES = [
    # (fusion, dtype, shape, the line axis, kernels expected)
    (logsumexp_over(1), DataType.Float, (300, 5000), 1, [SchedulerKind.REDUCTION]),
    (logsumexp_over(1), DataType.BFloat16, (9, 300001), 1, [SchedulerKind.REDUCTION]),  # split
    (logsumexp_over(1), DataType.Double, (40, 777), 1, [SchedulerKind.REDUCTION]),
    (logsumexp_over(0), DataType.Float, (3000, 256), 0, [SchedulerKind.REDUCTION]),  # columns
    (logsumexp_over(0), DataType.BFloat16, (100003, 8), 0, [SchedulerKind.REDUCTION]),
    # columns enough for the default's vector of outputs a lane
    (logsumexp_over(0), DataType.Float, (16, 262144), 0, [SchedulerKind.REDUCTION]),
    (softmax, DataType.Float, (396, 70000), 1, [SchedulerKind.NORMALIZATION]),  # re-read rows
    (softmax, DataType.Float, (9, 70000), 1, [SchedulerKind.REDUCTION, SchedulerKind.POINTWISE]),
    (softmax, DataType.BFloat16, (8, 2**20), 1, [SchedulerKind.REDUCTION, SchedulerKind.POINTWISE]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("split,vector", [(None, None), (3, None), (None, 2), (None, 4)])
def test_one_pass_max_and_sum_agree_with_the_two_pass_reference(case, split, vector, rng):
    define, dtype, shape, axis, kinds = CASES[case]
    if vector is not None and axis != 0:
        pytest.skip("a vector of outputs a lane: columns only")
    with FusionDefinition() as fd:
        define(fd, dtype)
    x = rng.standard_normal(shape).astype(dtype.numpy)
    inputs = [with_edge_lines(x, axis, rng)]
    changes = {} if split is None else {"split": split, "vector": 1}  # one output a lane
    if vector is not None:  # consecutive columns a lane, an accumulator each
        changes = {"vector": vector, "split": 1}
    got, launched = run_with_reduction_params(fd, inputs, **changes)
    assert [SchedulerKind(k.scheduler) for k in launched] == kinds
    if vector is not None:
        assert launched[0].params["vector"] == vector
    for k in launched:
        if SchedulerKind(k.scheduler) is SchedulerKind.NORMALIZATION:
            assert not (k.params["cache_row"] or k.params["shared_row"]), k.params
    assert_agrees(fd, inputs, got, dtype)
