"""The definition API: ops, shape inference at definition time, errors, printing."""

import pathlib

import numpy as np
import pytest

from tunefuse import DataType, DefinitionError, FusionDefinition, ShapeError, reference
from tunefuse.fusion_file import load_fusion_file
from tunefuse.ir.fusion import Sym, TensorType
from tunefuse.ir.ops import OpKind

ROOT = pathlib.Path(__file__).resolve().parents[1]


def out_type(fd, k=0):
    return fd.fusion.values[fd.fusion.outputs[k].value]


def test_define_tensor_symbolic_broadcast_and_static():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1, 8], contiguity=[True, None, True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(t))
    assert out_type(fd) == TensorType(DataType.Float, (Sym("T0.0"), 1, 8))


def test_from_array_reads_layout():
    a = np.zeros((4, 1, 6), dtype=np.float16).transpose(2, 1, 0)
    with FusionDefinition() as fd:
        t = fd.from_array(a)
        fd.add_output(fd.ops.neg(t))
    attrs = fd.fusion.nodes[0].attrs
    assert attrs.shape == (-1, 1, -1) and attrs.dtype is DataType.Half
    assert attrs.contiguity == (True, None, True)
    assert attrs.stride_order == (
        0,
        2,
        1,
    )  # the size-1 dim sits just outside its row-major neighbour


def test_type_promotion_and_half_compute():
    with FusionDefinition() as fd:
        h = fd.define_tensor(shape=[-1], dtype=DataType.Half)
        i = fd.define_tensor(shape=[-1], dtype=DataType.Int32)
        fd.add_output(fd.ops.mul(h, 2.5))  # scalar keeps Half
        fd.add_output(fd.ops.add(h, i))  # Half + Int32 -> Half
        fd.add_output(fd.ops.div(i, i))  # int div int -> the int (truncating, as nvFuser's)
        fd.add_output(fd.ops.exp(i))  # int -> Float
        fd.add_output(fd.ops.lt(h, i))
        fd.add_output(fd.ops.sum(i, dims=[0]))  # int sum -> Int
    dtypes = [out_type(fd, k).dtype for k in range(6)]
    assert dtypes == [
        DataType.Half,
        DataType.Half,
        DataType.Int32,
        DataType.Float,
        DataType.Bool,
        DataType.Int,
    ]


def test_reductions_dims_keepdim_and_var_mean():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 4, 5])
        fd.add_output(fd.ops.sum(t, dims=[-1, 0], keepdim=True))
        var, mean = fd.ops.var_mean(t, dims=1, correction=0)
        fd.add_output(var)
        fd.add_output(mean)
    assert out_type(fd, 0).shape == (1, 4, 1)
    assert out_type(fd, 1).shape == (Sym("T0.0"), 5)
    assert fd.fusion.nodes[1].attrs.dims == (0, 2)


def test_lower_ranks_broadcast_along_new_outer_dims_as_in_nvfuser(rng):
    """nvFuser's elementwise ops read an operand of lower rank as if broadcast along new outer
    dims: [4] against [3, 4] is [1, 4], a 0-dim tensor is [1, 1]."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        scale = fd.define_tensor(shape=[], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.where(fd.ops.gt(b, 0.0), fd.ops.mul(x, scale), b))
    assert out_type(fd, 0).rank == 2
    x = rng.standard_normal((3, 4), dtype=np.float32)
    b = rng.standard_normal(4, dtype=np.float32)
    (got,) = reference.run(fd.fusion, [x, np.array(2.0, dtype=np.float32), b])
    np.testing.assert_array_equal(got, np.where(b > 0, x * np.float32(2.0), b))


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda fd, a, b: fd.ops.add(fd.ops.permute(a, dims=[1, 0]), b),
            "add .*dim 1 of operand T3 has extent 4 but operand T2 has 3",
        ),
        (lambda fd, a, b: fd.ops.sum(a, dims=[2]), "dim 2 is out of range for rank 2"),
        (lambda fd, a, b: fd.ops.permute(a, dims=[0, 0]), "not a permutation"),
        (lambda fd, a, b: fd.ops.reshape(a, new_shape=[-1, -1]), "only one dim may be -1"),
        (lambda fd, a, b: fd.ops.reshape(a, new_shape=[7, 7]), "cannot reshape \\[3, 4\\]"),
        (
            lambda fd, a, b: fd.ops.squeeze(a, dims=[0]),
            "cannot squeeze dim 0 of T0: its extent is 3",
        ),
        (
            lambda fd, a, b: fd.ops.add(
                a, fd.ops.broadcast_in_dim(b, shape=[3, 5], broadcast_dims=[1])
            ),
            "dim 0 of T1 has extent 4, which cannot broadcast to extent 5",
        ),
        (lambda fd, a, b: fd.ops.bitwise_and(a, a), "bitwise_and: needs integral"),
        (lambda fd, a, b: fd.ops.where(a, a, a), "condition T0 must be Bool"),
        (lambda fd, a, b: fd.ops.mean(fd.ops.cast(a, DataType.Int), dims=[0]), "floating-point"),
        (lambda fd, a, b: fd.ops.slice(a, [0, 0], [2], [1, 1]), "need 2 entries each"),
        (lambda fd, a, b: fd.ops.pad(a, [1, 1, 1, 1, 1, 1]), "at most 4"),
        (lambda fd, a, b: fd.ops.cat([a, b], dim=0), "has rank 1, expected 2"),
        (lambda fd, a, b: fd.ops.expand(a, shape=[3, 5]), "extent 4, which cannot broadcast"),
    ],
)
def test_errors_name_op_operand_and_dim(build, message):
    fd = FusionDefinition()
    with pytest.raises((DefinitionError, ShapeError), match=message):
        with fd:
            a = fd.define_tensor(shape=[3, 4])
            b = fd.define_tensor(shape=[4])
            build(fd, a, b)


def test_static_sizes_mismatch_names_both_operands():
    with pytest.raises(ShapeError, match="dim 1 of operand T1 has extent 5 but operand T0 has 4"):
        with FusionDefinition() as fd:
            fd.ops.add(fd.define_tensor(shape=[3, 4]), fd.define_tensor(shape=[3, 5]))


def test_bad_define_tensor_and_outputs():
    with pytest.raises(DefinitionError, match="contiguity has 1 entries for rank 2"):
        with FusionDefinition() as fd:
            fd.define_tensor(shape=[-1, -1], contiguity=[True])
    with pytest.raises(DefinitionError, match="at least one output"):
        with FusionDefinition() as fd:
            fd.define_tensor(shape=[-1])
    with pytest.raises(DefinitionError, match="scalar; outputs must be tensors"):
        with FusionDefinition() as fd:
            fd.add_output(fd.define_scalar(1.0))
    with pytest.raises(DefinitionError, match="not a tensor input"):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1])
            e = fd.ops.exp(t)
            fd.add_output(e, alias_input=e)


def test_complete_definition_is_frozen():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        fd.add_output(t)
    with pytest.raises(DefinitionError, match="complete"):
        fd.ops.exp(t)


def test_all_ops_build_and_print_runnable_python():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        n = fd.define_scalar(dtype=DataType.Int)
        b = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        s = fd.define_scalar(dtype=DataType.Double)
        ops = fd.ops
        y = ops.add(ops.mul(x, s), ops.broadcast_in_dim(b, shape=x.shape(), broadcast_dims=[1]))
        y = ops.where(ops.gt(y, 0.0), ops.gelu(y), ops.erfc(y))
        y = ops.clamp(y, -3.0, 3.0)
        y = ops.lerp(y, x, 0.25)
        y = ops.addcmul(y, x, x, 0.5)
        z = ops.reshape(y, new_shape=[n, -1])
        z = ops.permute(z, dims=[1, 0])
        z = ops.unsqueeze(z, dim=0)
        z = ops.squeeze(z, dims=[0])
        z = ops.slice(z, [0, 0], [4, 4], [1, 2])
        z = ops.pad(z, [1, 1], 0.0)
        c = ops.cat([z, z], dim=0)
        v, m = ops.var_mean(c, dims=[1], correction=1, keepdim=True)
        e = ops.expand(v, shape=[-1, 3])
        f = ops.full([2, 3], 1.5, DataType.Half)
        i = ops.iota(5, 0, 1, DataType.Int)
        fd.add_output(ops.set(ops.segment_set(e)))
        fd.add_output(ops.cast(f, DataType.BFloat16))
        fd.add_output(ops.bitwise_xor(i, 3))
        fd.add_output(ops.prod(ops.cast(ops.isfinite(x), DataType.Int), dims=[0]))
        fd.add_output(y, alias_input=x)
    text = str(fd)
    scope = {}
    exec(compile(text, "<printed fusion>", "exec"), scope)  # the printer's own output
    assert scope["fd"].fusion == fd.fusion
    assert scope["fd"].fusion.fusion_id == fd.fusion.fusion_id


def test_every_op_kind_has_a_frontend_spelling():
    spelled = {name for name in dir(FusionDefinition().ops) if not name.startswith("_")}
    internal = {OpKind.DEFINE_TENSOR, OpKind.DEFINE_SCALAR, OpKind.CONSTANT, OpKind.RNG_STATE}
    missing = {op.value for op in OpKind if op not in internal} - spelled
    assert not missing


def _seed_script(name: str) -> str:
    """The seed repro scripts, as written for nvFuser, with their import line changed."""
    text = (ROOT / "tests" / "seed_scripts" / name).read_text()
    return text.replace("from torch._C._nvfuser import", "from tunefuse.nvfuser import")


@pytest.mark.parametrize("script", ["transpose_views.py", "gelu_views.py", "gelu_no_views.py"])
def test_seed_repro_scripts_build_with_only_the_import_changed(script):
    text = _seed_script(script)
    # Build only: the definition part, before the inputs are made on the GPU.
    head = text.split("inputs = [")[0].replace("import torch\n", "")
    scope = {}
    exec(compile(head, script, "exec"), scope)
    fs = scope["fs"]
    assert fs.definition is not None and fs.definition.fusion.outputs


def test_legacy_and_current_nvfuser_names():
    from tunefuse.nvfuser import DataType as LegacyDataType
    from tunefuse.nvfuser import Fusion
    from tunefuse.nvfuser import FusionDefinition as LegacyFD

    fs = Fusion()
    with LegacyFD(fs) as fd:
        t0 = fd.define_tensor(
            symbolic_sizes=[-1, -1, -1], contiguous=[True, True, True], dtype=LegacyDataType.Float
        )
        t1 = fd.ops.view(t0, original_shape=[768, 128, 64], new_shape=[64, 12, 128, 64])
        t2 = fd.permute(t1, [0, 2, 1, 3])
        fd.add_output(fd.ops.set(t2))
    assert fs.definition is fd
    assert fd.fusion.values[fd.fusion.outputs[0].value].shape == (64, 128, 12, 64)
    with pytest.raises(DefinitionError, match="original_shape dim 0 is 5 but T0 has extent 4"):
        with LegacyFD(Fusion()) as fd2:
            t = fd2.define_tensor(shape=[4, 4])
            fd2.ops.view(t, original_shape=[5, 4], new_shape=[16])


def test_seed_fusion_file_builds():
    cases = load_fusion_file(ROOT / "examples" / "seed_fusions.py")
    names = [case.name for case in cases]
    assert "gelu_with_views" in names and sum(n.startswith("sequential") for n in names) == 8
    for case in cases:
        assert case.build().fusion.outputs
