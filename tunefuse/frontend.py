"""`FusionDefinition`: the nvFuser-shaped way to write a fusion.

with FusionDefinition() as fd:
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    y = fd.ops.mul(x, fd.define_scalar(0.5))
    fd.add_output(fd.ops.erf(y))
print(fd)                    # the definition as runnable Python
fd.execute([array])          # -> list of outputs (GPU)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from tunefuse.arrays import (
    Device,
    compute_tensor_descriptor,
    contiguity_of,
    describe_array,
    from_allocation_order,
    stride_order_of,
)
from tunefuse.cache import DEFAULT as _DEFAULT_CACHE
from tunefuse.composite_ops import CompositeOps
from tunefuse.errors import (
    CompletedDefinitionError,
    DefinitionError,
    ExecutionError,
    InputMismatchError,
    NoProfileError,
)
from tunefuse.ir.dtypes import DataType, from_any_dtype, python_scalar_dtype
from tunefuse.ir.elementwise import ELEMENTWISE
from tunefuse.ir.fusion import Fusion, ScalarType, TensorType
from tunefuse.ir.infer import FusionBuilder
from tunefuse.ir.ops import (
    BroadcastAttrs,
    BroadcastInDimAttrs,
    CastAttrs,
    ConstantAttrs,
    Dim,
    DimAttrs,
    DimsAttrs,
    FullAttrs,
    IotaAttrs,
    NoAttrs,
    OpKind,
    PadAttrs,
    PermuteAttrs,
    ReductionAttrs,
    ScalarInputAttrs,
    ScalarRef,
    ShapeAttrs,
    SliceAttrs,
    TensorInputAttrs,
)
from tunefuse.ir.shapes import normalize_dim, normalize_dims

if TYPE_CHECKING:
    from tunefuse.device_info import DeviceInfo
    from tunefuse.planning.plan import Plan


@dataclass(frozen=True, eq=False)
class Value:
    """A handle to a value of a definition being written (nvFuser's Tensor / Scalar)."""

    fd: FusionDefinition
    id: int

    def __repr__(self) -> str:
        return self.fd._builder_name(self.id)

    # Python operators on tensors and scalars (`T0.size(0) * T0.size(1)`) are the ops: the
    # binary ones are made from _OPERATORS below the class. `/` is true division (`fd.ops.div`
    # truncates integers, as C and nvFuser do); `%` is the remainder with the divisor's sign.
    def __neg__(self) -> Value:
        return self.fd.ops.neg(self)

    def __abs__(self) -> Value:
        return self.fd.ops.abs(self)

    def is_tensor(self) -> bool:
        """nvFuser's `is_tensor()`: a tensor, not a scalar."""
        return isinstance(self, Tensor)


_OPERATORS = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "truediv": "truediv",
    "mod": "remainder",
    "pow": "pow",
}


def _make_operator(op: str, reflected: bool):  # noqa: ANN202 - builds a method
    def operator(self: Value, other: Operand) -> Value:
        ops = self.fd.ops
        return getattr(ops, op)(other, self) if reflected else getattr(ops, op)(self, other)

    return operator


for _name, _op in _OPERATORS.items():
    setattr(Value, f"__{_name}__", _make_operator(_op, reflected=False))
    setattr(Value, f"__r{_name}__", _make_operator(_op, reflected=True))


class Tensor(Value):
    @property
    def ndim(self) -> int:
        return self.fd._tensor_type(self).rank

    @property
    def dtype(self) -> DataType:
        return self.fd._tensor_type(self).dtype

    def size(self, dim: int) -> Scalar:
        """This tensor's extent along `dim`, as an Int scalar (for symbolic shapes)."""
        return self.fd.ops.size(self, dim)

    def shape(self) -> Vector:
        """Every extent as an Int scalar: a shape for reshape, broadcast_in_dim, full."""
        return Vector(self.size(d) for d in range(self.ndim))


class Scalar(Value):
    pass


class Vector(list):
    """nvFuser's Vector: a shape of ints and Int scalars (`fd.define_vector`, `T.shape()`),
    accepted wherever a shape is."""


Operand = Union[Value, bool, int, float]


class FusionDefinition:
    """Build a fusion inside a `with` block; on exit it is frozen into `fd.fusion`."""

    def __init__(self) -> None:
        self._builder = FusionBuilder()
        self._fusion: Fusion | None = None
        self.ops = Ops(self)
        self._vector_inputs: dict[int, int] = {}
        self._stride_orders: dict[
            int, tuple[int, ...]
        ] = {}  # fd.ops.stride_order's results  # define_vector(n): first input position -> n
        self._runner = None  # the executor of the last execute()
        self._runners: dict = {}  # one executor per cache
        self._runner_cache: object = None  # the `cache` argument _runner serves
        self._profile = None  # execute(profile=True)'s FusionProfile
        self._debug_output: str | None = None  # execute(capture_debug_output=True)'s plan
        self.segments: list[FusionDefinition] = []  # fd.segment(inputs)'s, run by execute
        self.segment_index_space_maps: dict[FusionDefinition, dict[int, int]] = {}

    # -- context ---------------------------------------------------------------------------
    def __enter__(self) -> FusionDefinition:
        if self._fusion is not None:
            raise DefinitionError("this FusionDefinition is already complete; make a new one")
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._fusion = self._builder.finish()

    @property
    def fusion(self) -> Fusion:
        if self._fusion is None:
            raise DefinitionError("the definition is not complete: leave the `with` block first")
        return self._fusion

    @classmethod
    def from_fusion(cls, fusion: Fusion) -> FusionDefinition:
        fd = cls()
        fd._fusion = fusion
        return fd

    # -- inputs ----------------------------------------------------------------------------
    def define_tensor(
        self,
        shape: Sequence[int] | None = None,
        contiguity: Sequence[bool | None] | bool | None = None,
        dtype: DataType = DataType.Float,
        stride_order: Sequence[int] | None = None,
        *,
        symbolic_sizes: Sequence[int] | None = None,
        contiguous: Sequence[bool | None] | bool | None = None,
        sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        is_cpu: bool = False,
    ) -> Tensor:
        """Declare a tensor input. `shape`: -1 symbolic, 1 broadcast, n >= 0 static.
        nvFuser's other spellings work too: `symbolic_sizes`/`contiguous` (legacy), and
        concrete `sizes`/`strides`, which declare a symbolic tensor of that layout."""
        self._check_open()
        if is_cpu:
            if (
                tuple(
                    shape
                    if shape is not None
                    else sizes
                    if sizes is not None
                    else symbolic_sizes or ()
                )
                != ()
            ):
                raise DefinitionError(
                    "define_tensor: a CPU tensor (is_cpu=True) must be 0-dim: a scalar that is "
                    "broadcast against the GPU tensors; pass larger tensors on the GPU"
                )
            # nvFuser's CPU scalar tensor: a scalar input that takes a 0-dim host tensor (or a number).
            return self._add_scalar_input(dtype)  # type: ignore[return-value]
        contiguity_in_memory_order = stride_order is not None
        if sizes is not None:
            if shape is not None or symbolic_sizes is not None:
                raise DefinitionError("define_tensor: give either sizes or shape, not both")
            sizes = tuple(int(s) for s in sizes)
            strides = tuple(int(s) for s in strides) if strides is not None else None
            if strides is None or len(strides) != len(sizes):
                raise DefinitionError("define_tensor: sizes needs strides of the same rank")
            shape = tuple(1 if s == 1 else -1 for s in sizes)
            contiguity = contiguity_of(sizes, strides)
            stride_order = stride_order_of(sizes, strides)
            contiguity_in_memory_order = False
        if shape is None:
            shape = symbolic_sizes
        if contiguity is None:
            contiguity = contiguous
        if shape is None:
            raise DefinitionError("define_tensor: shape is required")
        shape = tuple(shape)
        if isinstance(contiguity, bool):
            contiguity = [contiguity] * len(shape)
        if contiguity is None:
            contiguity = [True] * len(shape)
        if (
            contiguity_in_memory_order
            and len(contiguity) == len(shape)
            and sorted(stride_order) == list(range(len(shape)))
        ):
            # nvFuser lists contiguity in the stride order's (memory) order, outermost first
            contiguity = from_allocation_order(contiguity, stride_order)
        contiguity = tuple(None if s == 1 else c for s, c in zip(shape, contiguity)) + tuple(
            contiguity[len(shape) :]
        )
        if stride_order is not None:
            stride_order = tuple(stride_order)
            if stride_order == tuple(range(len(shape) - 1, -1, -1)):
                stride_order = None
        attrs = TensorInputAttrs(shape, contiguity, from_any_dtype(dtype), stride_order)
        return Tensor(self, self._add(OpKind.DEFINE_TENSOR, [], attrs)[0])

    def define_scalar(self, value: Any = None, dtype: DataType | None = None) -> Scalar:
        """`define_scalar(0.5)` is a constant; `define_scalar(dtype=DataType.Int)` (or
        `define_scalar(DataType.Int)`) an input of that dtype, and `define_scalar()` a Double
        input, as in nvFuser."""
        self._check_open()
        if isinstance(value, DataType) and dtype is None:
            value, dtype = None, value
        if value is None:
            dtype = DataType.Double if dtype is None else from_any_dtype(dtype)
            if not isinstance(dtype, DataType):
                raise DefinitionError(f"define_scalar: dtype {dtype!r} is not a DataType")
            return self._add_scalar_input(dtype)
        return self._constant(value, dtype)

    def _add_scalar_input(self, dtype: DataType) -> Scalar:
        return Scalar(self, self._add(OpKind.DEFINE_SCALAR, [], ScalarInputAttrs(dtype))[0])

    def define_vector(
        self, values: int | Sequence[Any], dtype: DataType | None = DataType.Int
    ) -> Vector:
        """nvFuser's define_vector. `define_vector([S0, 4, T0.size(1) * 2])`: a shape of ints
        and Int scalars, for reshape, broadcast_in_dim, expand, full. `define_vector(n)`: a
        shape given when the fusion runs, n Int inputs that the caller passes as one list or
        tuple at this input's position."""
        self._check_open()
        if dtype not in (DataType.Int, DataType.Int32, None):
            raise DefinitionError(
                f"define_vector: a vector of {dtype.value} is not a shape; only Int vectors are"
            )
        if isinstance(values, int) and not isinstance(values, bool):
            if values < 0:
                raise DefinitionError(f"define_vector: length {values} is negative")
            first = sum(1 for n in self._builder.nodes if n.op.is_input)
            self._vector_inputs[first] = values
            return Vector(self.define_scalar(dtype=DataType.Int) for _ in range(values))
        if isinstance(values, Value) or not isinstance(values, (list, tuple)):
            raise DefinitionError(
                f"define_vector: expected a length or a list of ints and scalars, got {values!r}"
            )
        entries: list = []
        for k, v in enumerate(values):
            if isinstance(v, Value):
                v = _integral_extent(self, v)
                vt = self._builder.values[self._operand_id(v, "define_vector")]
                if not isinstance(vt, ScalarType) or not vt.dtype.is_integral:
                    raise DefinitionError(
                        f"define_vector: entry {k} ({v!r}) must be an integer scalar"
                    )
                entries.append(v)
            elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                entries.append(int(v))
            else:
                raise DefinitionError(
                    f"define_vector: entry {k} ({v!r}) must be an int or an integer scalar"
                )
        return Vector(entries)

    def flat_inputs(self, inputs: Sequence[object]) -> Sequence[object]:
        """`inputs` as the fusion takes them: each define_vector(n) input's list spread into
        its n scalars (checked for length)."""
        if not self._vector_inputs:
            return inputs
        flat: list = []
        for given in inputs:
            n = self._vector_inputs.get(len(flat))
            if n is None:
                flat.append(given)
                continue
            if isinstance(given, (str, bytes)) or not hasattr(given, "__len__") or len(given) != n:  # type: ignore[arg-type]
                raise InputMismatchError(
                    f"input {len(flat)} is a define_vector({n}): pass a list or tuple of "
                    f"{n} ints, got {given!r}"
                )
            flat.extend(int(x) for x in given)  # type: ignore[union-attr]
        return flat

    def define_constant(self, value: Any, dtype: DataType | None = None) -> Scalar:
        """Legacy nvFuser spelling of `define_scalar(value)`."""
        return self.define_scalar(value, dtype)

    def from_array(self, array: object, static_sizes: bool = False) -> Tensor:
        """A tensor input laid out like `array` (numpy, torch, CuPy, ...): symbolic sizes
        (its own sizes with `static_sizes`), size-1 dims as broadcast, contiguity and stride
        order from its strides."""
        info = describe_array(array, name="from_array")
        if not static_sizes:
            return self.define_tensor(sizes=info.shape, strides=info.strides, dtype=info.dtype)
        contiguity, order = compute_tensor_descriptor(info.shape, info.strides)
        return self.define_tensor(
            shape=info.shape, contiguity=contiguity, dtype=info.dtype, stride_order=order
        )

    def from_pytorch(self, tensor: object, static_sizes: bool = False) -> Tensor:
        """nvFuser's `from_pytorch`: `from_array` of a CUDA tensor; a 0-dim CPU tensor is
        nvFuser's CPU scalar (`is_cpu=True`), and a larger CPU tensor is refused, as nvFuser
        refuses it (pass it on the GPU, or declare a host array with `from_array`). Other
        arrays (NumPy, CuPy) go to `from_array`."""
        info = describe_array(tensor, name="from_pytorch")
        if info.framework == "torch" and info.device is Device.CPU:
            if info.shape != ():
                raise DefinitionError(
                    f"from_pytorch: a CPU tensor of shape {list(info.shape)}; nvFuser takes CUDA "
                    "tensors (and 0-dim CPU scalars): move it to the GPU, or use from_array"
                )
            return self.define_tensor(shape=[], dtype=info.dtype, is_cpu=True)
        return self.from_array(tensor, static_sizes)

    # -- outputs ---------------------------------------------------------------------------
    def add_output(
        self,
        value: Value,
        alias_input: Value | None = None,
        stride_order: Sequence[int] | None = None,
    ) -> None:
        """Mark an output; with `alias_input=x` the result is written into input `x` in place
        and not returned (as in nvFuser). `stride_order` lays the output out in memory as
        define_tensor's does (stride_order[d]: dim d's rank from the innermost); an output
        made by `fd.ops.stride_order` keeps that op's."""
        self._check_open()
        if isinstance(alias_input, (list, tuple)):  # legacy add_output(value, stride_order)
            alias_input, stride_order = None, alias_input
        vid = self._operand_id(value, "add_output")
        if stride_order is None:
            stride_order = self._stride_orders.get(vid)
        self._builder.add_output(
            vid,
            None if alias_input is None else self._operand_id(alias_input, "add_output"),
            None if stride_order is None else tuple(stride_order),
        )

    # -- running ---------------------------------------------------------------------------
    def plan(
        self,
        inputs: Sequence[object],
        out: Sequence[object] | None = None,
        device: DeviceInfo | None = None,
    ) -> Plan:
        """The executable plan for these inputs (and preallocated outputs): kernels,
        buffers and aliases. `print(fd.plan(inputs))` shows what will run and why.
        `device` (a `DeviceInfo`, e.g. `tunefuse.device_info.H100`): the plan for that GPU,
        as `execute` makes it there (a normalization whose rows it cannot hold nor spread
        over its SMs is split into a kernel a pass); None: every normalization one kernel."""
        from tunefuse.planning.plan import make_plan

        return make_plan(self.fusion, self.flat_inputs(inputs), out, device)

    def execute(
        self,
        inputs: Sequence[object],
        out: Sequence[object] | None = None,
        *,
        cache: Any = _DEFAULT_CACHE,
        **options: Any,
    ) -> list:
        """Run the fusion on `inputs`; returns the outputs (those not written in place).
        Pre-tuned kernels come from the persistent cache (`cache=None`: none; a
        `tunefuse.Cache` or URL: that one; default: TUNEFUSE_CACHE_URL or the SQLite file).
        `device=N` (or "cuda:N", a torch.device) picks the GPU for host inputs; device inputs
        run on their own device, which must be that one when it is given."""
        if self.segments:
            return self._execute_segments(inputs, out=out, cache=cache, **options)
        inputs = self.flat_inputs(inputs)
        runner = self._runner
        if (
            runner is not None
            and runner.device is None
            and cache is self._runner_cache
            and out is None
            and not options
        ):
            return runner.run(inputs, None)  # the hot path: same cache as last time
        from tunefuse.runtime.executor import execute

        result = execute(self, inputs, out=out, cache=cache, **options)
        self._runner_cache = cache
        return result

    def segment(self, inputs: Sequence[object]) -> list[FusionDefinition]:
        """nvFuser's `fd.segment(inputs)`: the kernels `execute(inputs)` would run, each as a
        FusionDefinition of its own (in run order); [] where it is one kernel. From then on
        `execute` runs the segments one after another (`fd.segments`;
        `fd.segment_index_space_maps[segment]` maps a segment's value ids to this
        definition's)."""
        from tunefuse.planning.plan import make_plan
        from tunefuse.planning.segment_definitions import segment_definitions
        from tunefuse.runtime.executor import device_info_for

        # Column sums taken in parts by a normalization (planning.column_partials) have no
        # definition of their own: the segments are the kernels without them.
        plan = make_plan(
            self.fusion,
            self.flat_inputs(inputs),
            None,
            device_info_for(self, inputs),
            column_partials=False,
        )
        self.segments = []
        self.segment_index_space_maps = {}
        for part in segment_definitions(plan):
            segment = FusionDefinition.from_fusion(part.fusion)
            self.segments.append(segment)
            self.segment_index_space_maps[segment] = dict(part.to_original)
        return list(self.segments)

    def _execute_segments(
        self, inputs: Sequence[object], out: Sequence[object] | None = None, **options: Any
    ) -> list:
        """Each segment in turn on the values the earlier ones made (nvFuser's
        `_execute_segments`); `out=` is not taken here."""
        if out is not None:
            raise ExecutionError(
                "execute(out=...) on a segmented definition: preallocated outputs are not "
                "taken by segments; run the unsegmented definition"
            )
        values = dict(zip(self.fusion.inputs, self.flat_inputs(inputs)))
        for segment in self.segments:
            to_original = self.segment_index_space_maps[segment]
            results = segment.execute(
                [values[to_original[v]] for v in segment.fusion.inputs], **options
            )
            made = [o.value for o in segment.fusion.outputs if o.alias_input is None]
            for v, result in zip(made, results):
                values[to_original[v]] = result
        return [values[o.value] for o in self.fusion.outputs if o.alias_input is None]

    def validate(
        self,
        inputs: Sequence[object],
        reference_outputs: Sequence[object] | None = None,
        **options: Any,
    ) -> None:
        """Run the fusion on `inputs` (`execute`'s options apply) and compare each output with
        `reference_outputs`, or where none are given with tunefuse's NumPy reference of this
        definition, within its dtype's tolerance: AssertionError naming the first output
        that differs, as nvFuser's `validate`."""
        from tunefuse import reference, rng
        from tunefuse.validate import compare

        if reference_outputs is None:
            # Before the run (an in-place output changes its input), drawing what the run will.
            with rng.replayed(*rng.state()):
                reference_outputs = reference.run(self, inputs)
        compare(self.execute(inputs, **options), reference_outputs)

    def inputs(self) -> list[int]:
        """nvFuser's `fd.inputs()`: the value ids of the inputs, in the order `execute` takes
        them (a define_vector(n) input counts n scalars)."""
        return list(self.fusion.inputs)

    def outputs(self) -> list[int]:
        """nvFuser's `fd.outputs()`: the value ids of what `execute` returns, in order (an
        output written in place into an input is not returned, so not listed)."""
        return [o.value for o in self.fusion.outputs if o.alias_input is None]

    def id(self) -> int:  # noqa: A003 - nvFuser's name
        """The definition's number in this process (nvFuser's fusion id): equal definitions
        share it; the printed definition names its function `nvfuser_fusion_id<id>`."""
        return self.fusion.number

    def profile(self):  # noqa: ANN201 - tunefuse.runtime.call_options.FusionProfile
        """The profile of the last `execute(..., profile=True)`: its synchronized wall time
        and the kernels it launched."""
        if self._profile is None:
            raise NoProfileError(
                "profile: no execute(..., profile=True) has run on this definition"
            )
        return self._profile

    def debug_output(self) -> str | None:
        """nvFuser's `debug_output()`: the last `execute(..., capture_debug_output=True)`'s
        description of what ran, or None where no call captured one."""
        return self._debug_output

    def get_debug_output(self) -> str:
        """What the last `execute(..., capture_debug_output=True)` ran and why (its plan)."""
        if self._debug_output is None:
            raise ExecutionError(
                "get_debug_output: no execute(..., capture_debug_output=True) has run"
            )
        return self._debug_output

    def __str__(self) -> str:
        if self._fusion is None:
            return "<FusionDefinition being defined>"
        return self._fusion.to_python(self._vector_inputs)

    __repr__ = __str__

    # -- plumbing for Ops ------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._fusion is not None:
            raise CompletedDefinitionError(
                "the definition is complete; it cannot take more ops "
                "(nvFuser: Attempting to add to a completed definition!)"
            )

    def _add(self, op: OpKind, inputs: Sequence[int], attrs: object) -> tuple[int, ...]:
        self._check_open()
        return self._builder.add(op, inputs, attrs)

    def _constant(self, value: Any, dtype: DataType | None = None) -> Scalar:
        dtype = dtype or python_scalar_dtype(value)
        if dtype.is_bool:
            value = bool(value)
        elif dtype.is_integral:
            if isinstance(value, float) and not value.is_integer():
                raise DefinitionError(
                    f"define_scalar: {value!r} is not an integer for dtype {dtype.value}"
                )
            value = int(value)
        else:
            value = float(value)
        return Scalar(self, self._add(OpKind.CONSTANT, [], ConstantAttrs(value, dtype))[0])

    def _operand_id(self, value: object, op: str) -> int:
        if isinstance(value, Value):
            if value.fd is not self:
                raise DefinitionError(f"{op}: {value!r} belongs to another FusionDefinition")
            return value.id
        raise DefinitionError(
            f"{op}: expected a tensor or scalar of this definition, got {value!r}"
        )

    def _value_id(self, value: Operand, op: str) -> int:
        """An operand's id; Python numbers become constants."""
        if isinstance(value, Value):
            return self._operand_id(value, op)
        if isinstance(value, (bool, int, float)):
            return self._constant(value).id
        if isinstance(value, np.generic):
            return self._constant(value.item()).id
        raise DefinitionError(f"{op}: unsupported operand {value!r}")

    def _tensor_type(self, t: Value) -> TensorType:
        vt = self._builder.values[t.id]
        assert isinstance(vt, TensorType)
        return vt

    def _builder_name(self, vid: int) -> str:
        return ("T" if isinstance(self._builder.values[vid], TensorType) else "S") + str(vid)

    def _wrap(self, vid: int) -> Value:
        return (
            Tensor(self, vid)
            if isinstance(self._builder.values[vid], TensorType)
            else Scalar(self, vid)
        )


def _shape_operands(
    fd: FusionDefinition, shape: Sequence[Any], first: int, op: str
) -> tuple[list[int], tuple[Dim, ...]]:
    """Split a shape of ints and Scalars into extra node inputs and Dim entries."""
    if isinstance(shape, Value) or not isinstance(shape, (list, tuple)):
        raise DefinitionError(f"{op}: shape must be a list of ints or scalars, got {shape!r}")
    extra: list[int] = []
    dims: list[Dim] = []
    for entry in shape:
        if isinstance(entry, Value):
            extra.append(fd._operand_id(_integral_extent(fd, entry), op))
            dims.append(ScalarRef(first + len(extra) - 1))
        else:
            try:
                dims.append(int(entry))
            except (TypeError, ValueError):
                raise DefinitionError(
                    f"{op}: shape entry {entry!r} is not an int or scalar"
                ) from None
    return extra, tuple(dims)


def _integral_extent(fd: FusionDefinition, entry: Value) -> Value:
    """A shape entry as an integer: a floating scalar computed when the fusion runs
    (`192 * reciprocal(S0)`) is cast to Int, truncating, as nvFuser casts an extent to its
    index type; one of constants alone must hold a whole number."""
    vid = fd._operand_id(entry, "shape")
    vt = fd._builder.values[vid]
    if not (isinstance(vt, ScalarType) and vt.dtype.is_floating):
        return entry
    folded = fd.ops._folded(vid)
    if folded is not None and float(folded) != int(folded):
        raise DefinitionError(
            f"shape entry {entry!r} is {folded}, not a whole number: an extent must be an "
            "integer scalar"
        )
    return fd.ops.cast(entry, DataType.Int)


def _from_end(bound: int, shape: tuple, dim: int, what: str) -> int:
    """A slice bound counted from the end when negative, clamped to [0, extent] (nvFuser's
    normalization); a non-negative bound is clamped at run time against the extent."""
    if bound >= 0:
        return bound
    extent = shape[dim] if dim < len(shape) else None
    if not isinstance(extent, int):
        raise DefinitionError(
            f"slice: the negative {what} {bound} of dim {dim} counts from an extent known only "
            "when the fusion runs; give it as a non-negative bound"
        )
    return max(bound + extent, 0)


def _dims_given(dims: Any, axes: Any, dim: Any) -> Any:
    given = [d for d in (dims, axes, dim) if d is not None]
    if len(given) > 1:
        raise DefinitionError("a reduction takes its dims once: as dims, axes or dim")
    return given[0] if given else None


def _dims_arg(dims: int | Sequence[int] | None, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        return [dims]
    return list(dims)


class Ops(CompositeOps):
    """`fd.ops`: every op of the definition language. Elementwise ops are made from the
    elementwise table; nvFuser's ops that are other ops put together come from
    `CompositeOps`; the rest are written out."""

    def __init__(self, fd: FusionDefinition) -> None:
        self._fd = fd

    def _one(self, op: OpKind, inputs: Sequence[int], attrs: object) -> Value:
        return self._fd._wrap(self._fd._add(op, inputs, attrs)[0])

    def _tensor(self, value: Value, op: str) -> int:
        vid = self._fd._operand_id(value, op)
        if not isinstance(self._fd._builder.values[vid], TensorType):
            raise DefinitionError(f"{op}: {value!r} must be a tensor")
        return vid

    def _promote_ranks(self, ids: Sequence[int]) -> list[int]:
        """An elementwise op's tensor operands of lower rank than the highest, broadcast
        along new outer dims (nvFuser's implicit broadcast: `mul` of [N] and [M, N] reads
        the [N] as [1, N]); scalars and operands of the highest rank pass unchanged."""
        values = self._fd._builder.values
        ranks = [values[v].rank if isinstance(values[v], TensorType) else None for v in ids]
        rank = max((r for r in ranks if r is not None), default=0)
        promoted = []
        for vid, r in zip(ids, ranks, strict=True):
            if r is not None and r < rank:
                flags = (True,) * (rank - r) + (False,) * r
                vid = self._fd._add(OpKind.BROADCAST, [vid], BroadcastAttrs(flags))[0]
            promoted.append(vid)
        return promoted

    def _rank(self, vid: int) -> int:
        vt = self._fd._builder.values[vid]
        assert isinstance(vt, TensorType)
        return vt.rank

    def cast(self, value: Operand, dtype: DataType) -> Value:
        dtype = from_any_dtype(dtype)
        return self._one(OpKind.CAST, [self._fd._value_id(value, "cast")], CastAttrs(dtype))

    # reductions
    def _reduce(
        self,
        op: OpKind,
        arg: Value,
        dims: Any,
        keepdim: bool,
        correction: int = 0,
        dtype: DataType | None = None,
    ) -> tuple[int, ...]:
        vid = self._tensor(arg, op.value)
        rank = self._rank(vid)
        norm = normalize_dims(op.value, _dims_arg(dims, rank), rank)
        attrs = ReductionAttrs(norm, bool(keepdim), int(correction), dtype)
        return self._fd._add(op, [vid], attrs)

    # sum, prod, max, min and mean are made from _make_reduction (below the class).
    def var(
        self,
        arg: Value,
        dims: Any = None,
        correction: int = 1,
        keepdim: bool = False,
        *,
        axes: Any = None,
        dim: Any = None,
    ) -> Tensor:
        return Tensor(
            self._fd,
            self._reduce(OpKind.VAR, arg, _dims_given(dims, axes, dim), keepdim, correction)[0],
        )

    def var_mean(
        self,
        arg: Value,
        dims: Any = None,
        correction: int = 1,
        keepdim: bool = False,
        *,
        axes: Any = None,
        dim: Any = None,
    ) -> tuple[Tensor, Tensor]:
        var, mean = self._reduce(
            OpKind.VAR_MEAN, arg, _dims_given(dims, axes, dim), keepdim, correction
        )
        return Tensor(self._fd, var), Tensor(self._fd, mean)

    # views
    def broadcast_in_dim(
        self, arg: Value, shape: Sequence[Any], broadcast_dims: Sequence[int]
    ) -> Tensor:
        vid = self._tensor(arg, "broadcast_in_dim")
        extra, dims = _shape_operands(self._fd, shape, 1, "broadcast_in_dim")
        bdims = tuple(
            normalize_dim("broadcast_in_dim", d, len(dims), what="broadcast dim")
            for d in broadcast_dims
        )
        return self._one(OpKind.BROADCAST_IN_DIM, [vid, *extra], BroadcastInDimAttrs(dims, bdims))  # type: ignore[return-value]

    def broadcast(self, arg: Value, is_broadcast_dim: Sequence[bool]) -> Tensor:
        vid = self._tensor(arg, "broadcast")
        return self._one(
            OpKind.BROADCAST, [vid], BroadcastAttrs(tuple(bool(b) for b in is_broadcast_dim))
        )  # type: ignore[return-value]

    def expand(self, arg: Value, shape: Sequence[Any]) -> Tensor:
        vid = self._tensor(arg, "expand")
        extra, dims = _shape_operands(self._fd, shape, 1, "expand")
        return self._one(OpKind.EXPAND, [vid, *extra], ShapeAttrs(dims))  # type: ignore[return-value]

    def reshape(
        self,
        arg: Value,
        new_shape: Sequence[Any] | None = None,
        *,
        original_shape: Sequence[int] | None = None,
        shape: Sequence[Any] | None = None,
    ) -> Tensor:
        """Reshape to `new_shape` (ints, Int scalars, one -1). `original_shape`, nvFuser's
        older spelling, is checked against the input's rank and static extents."""
        vid = self._tensor(arg, "reshape")
        if new_shape is None:
            new_shape = shape
        if new_shape is None:
            raise DefinitionError("reshape: new_shape is required")
        if original_shape is not None:
            self._check_original_shape(vid, original_shape, "reshape")
        extra, dims = _shape_operands(self._fd, new_shape, 1, "reshape")
        return self._one(OpKind.RESHAPE, [vid, *extra], ShapeAttrs(dims))  # type: ignore[return-value]

    def view(
        self,
        arg: Value,
        original_shape: Sequence[int] | None = None,
        new_shape: Sequence[Any] | None = None,
    ) -> Tensor:
        """Legacy nvFuser `view`: a reshape."""
        return self.reshape(arg, new_shape, original_shape=original_shape)

    def _check_original_shape(self, vid: int, original_shape: Sequence[int], op: str) -> None:
        vt = self._fd._builder.values[vid]
        assert isinstance(vt, TensorType)
        if len(original_shape) != vt.rank:
            raise DefinitionError(
                f"{op}: original_shape {list(original_shape)} has rank {len(original_shape)} but "
                f"T{vid} has rank {vt.rank}"
            )
        for d, (declared, actual) in enumerate(zip(original_shape, vt.shape)):
            if isinstance(actual, int) and declared not in (-1, actual):
                raise DefinitionError(
                    f"{op}: original_shape dim {d} is {declared} but T{vid} has extent {actual}"
                )

    def permute(self, arg: Value, dims: Sequence[int]) -> Tensor:
        vid = self._tensor(arg, "permute")
        rank = self._rank(vid)
        norm = tuple(normalize_dim("permute", d, rank) for d in dims)
        return self._one(OpKind.PERMUTE, [vid], PermuteAttrs(norm))  # type: ignore[return-value]

    def squeeze(
        self,
        arg: Value,
        dims: int | Sequence[int],
        original_shape: Sequence[int] | None = None,
        squeeze_expanded: bool = False,
    ) -> Tensor:
        """Drop dims of extent 1. `squeeze_expanded=True` (nvFuser) also drops an expanded
        broadcast dim of any extent: an input's dim declared with contiguity None, or a dim
        that broadcast_in_dim, broadcast or expand made. Every element along such a dim is the
        same, so it is sliced to its first and then squeezed. Any other squeezed dim must have
        extent 1: a static other extent is refused by name, a symbolic one is a ShapeError
        when the fusion runs with another extent."""
        vid = self._tensor(arg, "squeeze")
        rank = self._rank(vid)
        if original_shape is not None:
            self._check_original_shape(vid, original_shape, "squeeze")
        norm = normalize_dims("squeeze", _dims_arg(dims, rank), rank)
        shape = self._fd._builder.values[vid].shape
        expanded = (
            [d for d in norm if shape[d] != 1 and d in self._broadcast_dims(vid)]
            if squeeze_expanded
            else []
        )
        wide = [d for d in norm if isinstance(shape[d], int) and shape[d] != 1]
        if squeeze_expanded and set(wide) - set(expanded):
            d = min(set(wide) - set(expanded))
            raise DefinitionError(
                f"squeeze: squeeze_expanded=True of dim {d} of extent {shape[d]}, which is not a "
                "broadcast dim (an input's dim of contiguity None, or one made by "
                "broadcast_in_dim, broadcast or expand): only broadcast dims and dims of extent 1 "
                "are squeezed"
            )
        if expanded:
            # A huge end is clamped to the extent when the fusion runs (slice's normalization).
            ends = [
                1 if d in expanded else e if isinstance(e, int) else 2**62
                for d, e in enumerate(shape)
            ]
            vid = self.slice(self._fd._wrap(vid), [0] * rank, ends).id
        return self._one(OpKind.SQUEEZE, [vid], DimsAttrs(norm))  # type: ignore[return-value]

    def _broadcast_dims(self, vid: int) -> set[int]:
        """The dims of value `vid` known to be broadcasts (every element along them the same):
        an input's dims of contiguity None, and those broadcast_in_dim, broadcast and expand
        made or kept."""
        builder = self._fd._builder
        node = builder.producer(vid)
        a = node.attrs
        if node.op is OpKind.DEFINE_TENSOR:
            return {d for d, c in enumerate(a.contiguity) if c is None}  # type: ignore[attr-defined]
        if node.op is OpKind.BROADCAST_IN_DIM:
            source = self._broadcast_dims(node.inputs[0])
            kept = {out for k, out in enumerate(a.broadcast_dims) if k in source}  # type: ignore[attr-defined]
            return (set(range(len(a.shape))) - set(a.broadcast_dims)) | kept  # type: ignore[attr-defined]
        if node.op is OpKind.BROADCAST:
            source = self._broadcast_dims(node.inputs[0])
            out_dims = [d for d, b in enumerate(a.is_broadcast_dim) if not b]  # type: ignore[attr-defined]
            made = {d for d, b in enumerate(a.is_broadcast_dim) if b}  # type: ignore[attr-defined]
            return made | {out_dims[k] for k in source if k < len(out_dims)}
        if node.op is OpKind.EXPAND:
            src_shape = builder.values[node.inputs[0]].shape  # type: ignore[union-attr]
            offset = len(a.shape) - len(src_shape)  # type: ignore[attr-defined]
            source = self._broadcast_dims(node.inputs[0])
            return set(range(offset)) | {
                d + offset for d, e in enumerate(src_shape) if e == 1 or d in source
            }
        return set()

    def unsqueeze(self, arg: Value, dim: int) -> Tensor:
        vid = self._tensor(arg, "unsqueeze")
        norm = normalize_dim("unsqueeze", dim, self._rank(vid), insert=True)
        return self._one(OpKind.UNSQUEEZE, [vid], DimAttrs(norm))  # type: ignore[return-value]

    def slice(
        self,
        arg: Value,
        start_indices: Sequence[Any],
        end_indices: Sequence[Any],
        strides: Sequence[Any] | None = None,
        manual_normalization: bool | int = False,
    ) -> Tensor:
        """Elements start:end:stride of each dim. Bounds are ints or constant scalars. As in
        nvFuser, unless `manual_normalization`, a negative bound counts from the end (the
        extent must then be static) and bounds past the extent are clamped to it."""
        vid = self._tensor(arg, "slice")
        if strides is None:
            strides = [1] * len(start_indices)
        starts, ends, steps = (
            tuple(self._constant_int(v, f"slice {what}") for v in values)
            for what, values in (
                ("start", start_indices),
                ("end", end_indices),
                ("stride", strides),
            )
        )
        if not manual_normalization:
            shape = self._fd._builder.values[vid].shape  # type: ignore[union-attr]
            starts = tuple(_from_end(s, shape, d, "start") for d, s in enumerate(starts))
            ends = tuple(_from_end(e, shape, d, "end") for d, e in enumerate(ends))
            ends = tuple(max(e, s) for s, e in zip(starts, ends))  # an empty slice, as torch
        return self._one(OpKind.SLICE, [vid], SliceAttrs(starts, ends, steps))  # type: ignore[return-value]

    def _constant_int(self, value: Any, what: str) -> int:
        """An int, or the value of an Int scalar computed from constants alone (nvFuser lets
        slice bounds and pad widths be Scalars)."""
        if isinstance(value, Value):
            folded = self._folded(self._fd._operand_id(value, what))
            vt = self._fd._builder.values[value.id]
            if folded is None or not vt.dtype.is_integral:  # type: ignore[union-attr]
                raise DefinitionError(
                    f"{what}: {value!r} must be a constant integer; bounds known only when the "
                    "fusion runs are not supported"
                )
            return int(folded)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise DefinitionError(f"{what}: {value!r} is not an int") from None

    def _folded(self, vid: int) -> object | None:
        """The value of scalar `vid` where it is computed from constants alone (evaluated as
        the reference evaluates it), else None."""
        from tunefuse import reference

        builder = self._fd._builder
        node = builder.producer(vid)
        if node.op is OpKind.CONSTANT:
            return node.attrs.value  # type: ignore[attr-defined]
        if not (node.op in ELEMENTWISE or node.op is OpKind.CAST) or not all(
            isinstance(builder.values[v], ScalarType) for v in node.inputs
        ):
            return None
        env = {}
        for v in node.inputs:
            operand = self._folded(v)
            if operand is None:
                return None
            env[v] = np.asarray(operand)
        return reference.eval_node(builder, node, env)[0].item()  # type: ignore[arg-type]

    # copies
    def pad(self, arg: Value, pad_widths: Sequence[int], value: Operand | None = None) -> Tensor:
        vid = self._tensor(arg, "pad")
        dtype = self._fd._builder.values[vid].dtype
        fill = (
            self._fd._value_id(value, "pad")
            if value is not None
            else self._fd._constant(0, dtype).id
        )
        widths = tuple(self._constant_int(w, "pad width") for w in pad_widths)
        return self._one(OpKind.PAD, [vid, fill], PadAttrs(widths))  # type: ignore[return-value]

    def cat(
        self, tensors: Sequence[Value], dim: int = 0, manual_padding: bool | int = False
    ) -> Tensor:
        """Tensors joined along `dim`. `manual_padding=True` (nvFuser's fusion translation):
        each tensor is already a pad of its part to the whole extent along `dim`; the parts
        are joined (`_unpadded_parts` checks the widths place them end to end)."""
        ids = [self._tensor(t, "cat") for t in tensors]
        if not ids:
            raise DefinitionError("cat: needs at least one tensor")
        norm = normalize_dim("cat", dim, self._rank(ids[0]))
        if manual_padding:
            ids = self._unpadded_parts(ids, norm)
        return self._one(OpKind.CAT, ids, DimAttrs(norm))  # type: ignore[return-value]

    def _unpadded_parts(self, ids: list[int], dim: int) -> list[int]:
        """The tensors the pads of a cat(manual_padding=True) padded. Each must be a pad
        along `dim` alone, and the widths must lay the parts end to end over the same whole:
        part k starts where part k-1 ends. Checked here, so the parts' extents along `dim`
        must be static (what nvFuser computes for other widths is not a concatenation)."""
        builder = self._fd._builder
        parts, spans = [], []
        for k, vid in enumerate(ids):
            node = builder.producer(vid)
            if node.op is not OpKind.PAD:
                raise DefinitionError(
                    f"cat: manual_padding=True needs every tensor to be a pad; tensor {k} is not"
                )
            source = node.inputs[0]
            shape = builder.values[source].shape  # type: ignore[union-attr]
            widths = node.attrs.pad_widths  # type: ignore[attr-defined]
            pairs = {
                len(shape) - 1 - j: (widths[2 * j], widths[2 * j + 1])
                for j in range(len(widths) // 2)
            }
            other = [d for d, (lo, hi) in pairs.items() if d != dim and (lo or hi)]
            if other:
                raise DefinitionError(
                    f"cat: manual_padding=True: tensor {k} is padded along dim {other[0]} too; "
                    f"only the cat dim {dim} may be padded"
                )
            if not isinstance(shape[dim], int):
                raise DefinitionError(
                    f"cat: manual_padding=True: the extent of tensor {k}'s unpadded part along "
                    f"dim {dim} is known only when the fusion runs; its place cannot be checked "
                    "(pass the unpadded tensors without manual_padding)"
                )
            left, right = pairs.get(dim, (0, 0))
            parts.append(source)
            spans.append((left, shape[dim], right))
        total = sum(extent for _, extent, _ in spans)
        start = 0
        for k, (left, extent, right) in enumerate(spans):
            if (left, right) != (start, total - start - extent):
                raise DefinitionError(
                    f"cat: manual_padding=True: tensor {k} is padded by ({left}, {right}) along dim "
                    f"{dim}; joined end to end its part of {extent} needs ({start}, "
                    f"{total - start - extent})"
                )
            start += extent
        return parts

    # data-dependent reads (indices are checked: an out-of-range one raises IndexOutOfRangeError)
    def index_select(self, arg: Value, index: Value, dim: int) -> Tensor:
        """torch.index_select (numpy's `take` for an N-d index): the index's dims replace
        `dim` of `arg`, each element read from `arg` at that index. A 0-dim index keeps
        `dim` with extent 1, as torch's and nvFuser's do."""
        vid, ix = self._tensor(arg, "index_select"), self._tensor(index, "index_select")
        if self._rank(ix) == 0:
            ix = self._tensor(self.unsqueeze(index, 0), "index_select")
        norm = normalize_dim("index_select", dim, self._rank(vid))
        return self._one(OpKind.INDEX_SELECT, [vid, ix], DimAttrs(norm))  # type: ignore[return-value]

    def gather(self, arg: Value, index: Value, dim: int) -> Tensor:
        """torch.gather: out[p] = arg[p with p[dim] = index[p]], in the index's shape."""
        vid, ix = self._tensor(arg, "gather"), self._tensor(index, "gather")
        norm = normalize_dim("gather", dim, self._rank(vid))
        return self._one(OpKind.GATHER, [vid, ix], DimAttrs(norm))  # type: ignore[return-value]

    def take_along_axis(self, arg: Value, index: Value, dim: int) -> Tensor:
        """nvFuser's take_along_axis (numpy's take_along_axis): a gather whose index has the
        extents of `arg` along the other dims."""
        return self.gather(arg, index, dim)

    def stride_order(self, arg: Value, stride_order: Sequence[int]) -> Tensor:
        """nvFuser's stride_order: `arg` laid out in memory in that order (define_tensor's
        convention) where it is a fusion output; a copy of `arg` everywhere else."""
        out = self.set(arg)
        order = tuple(int(o) for o in stride_order)
        if sorted(order) != list(range(self._rank(out.id))):
            raise DefinitionError(
                f"stride_order: {list(order)} is not a permutation of 0..{self._rank(out.id) - 1}"
            )
        self._fd._stride_orders[out.id] = order
        return out

    def set(self, arg: Value) -> Tensor:
        return self._one(OpKind.SET, [self._tensor(arg, "set")], NoAttrs())  # type: ignore[return-value]

    def segment_set(self, arg: Value) -> Tensor:
        return self._one(OpKind.SEGMENT_SET, [self._tensor(arg, "segment_set")], NoAttrs())  # type: ignore[return-value]

    # creation
    def full(self, shape: Sequence[Any], fill_value: Operand, dtype: DataType) -> Tensor:
        fill = self._fd._value_id(fill_value, "full")
        extra, dims = _shape_operands(self._fd, shape, 1, "full")
        return self._one(OpKind.FULL, [fill, *extra], FullAttrs(dims, dtype))  # type: ignore[return-value]

    def zeros(self, shape: Sequence[Any], dtype: DataType = DataType.Float) -> Tensor:
        return self.full(shape, self._fd._constant(0, dtype), dtype)

    def ones(self, shape: Sequence[Any], dtype: DataType = DataType.Float) -> Tensor:
        return self.full(shape, self._fd._constant(1, dtype), dtype)

    def iota(
        self,
        length: Operand,
        start: Operand | None = None,
        step: Operand | None = None,
        dtype: DataType = DataType.Int,
    ) -> Tensor:
        ids = [
            self._fd._value_id(length, "iota"),
            self._fd._value_id(
                start if start is not None else self._fd._constant(0, dtype), "iota"
            ),
            self._fd._value_id(step if step is not None else self._fd._constant(1, dtype), "iota"),
        ]
        return self._one(OpKind.IOTA, ids, IotaAttrs(dtype))  # type: ignore[return-value]

    def uniform(
        self,
        minval: Operand,
        maxval: Operand,
        shape: Sequence[Any],
        dtype: DataType = DataType.Float,
        rng_seed: Operand | None = None,
        rng_offset: Operand | None = None,
    ) -> Tensor:
        """Numbers drawn uniformly from [minval, maxval) (Philox over each element's position:
        `tunefuse.philox`). With `rng_seed` and `rng_offset` (Int scalars) the draw is
        reproducible; without them each call takes the next offset of the process's stream
        (`tunefuse.manual_seed`), as nvFuser takes torch's generator's."""
        return self._random(OpKind.UNIFORM, minval, maxval, shape, dtype, rng_seed, rng_offset)

    def normal(
        self,
        mean: Operand,
        std: Operand,
        shape: Sequence[Any],
        dtype: DataType = DataType.Float,
        rng_seed: Operand | None = None,
        rng_offset: Operand | None = None,
    ) -> Tensor:
        """Normally distributed numbers (Box-Muller over Philox); seed and offset as `uniform`."""
        return self._random(OpKind.NORMAL, mean, std, shape, dtype, rng_seed, rng_offset)

    def _random(
        self,
        op: OpKind,
        a: Operand,
        b: Operand,
        shape: Sequence[Any],
        dtype: DataType,
        seed: Operand | None,
        offset: Operand | None,
    ) -> Tensor:
        fd = self._fd
        if (seed is None) != (offset is None):
            raise DefinitionError(f"{op.value}: give rng_seed and rng_offset together, or neither")
        ids = [fd._value_id(a, op.value), fd._value_id(b, op.value)]
        if seed is None:
            ids += fd._add(OpKind.RNG_STATE, [], NoAttrs())
        else:
            ids += [fd._value_id(seed, op.value), fd._value_id(offset, op.value)]
        extra, dims = _shape_operands(fd, shape, 4, op.value)
        return self._one(op, [*ids, *extra], FullAttrs(dims, dtype))  # type: ignore[return-value]

    def size(self, arg: Value, dim: int) -> Scalar:
        vid = self._tensor(arg, "size")
        return self._one(OpKind.SIZE, [vid], DimAttrs(normalize_dim("size", dim, self._rank(vid))))  # type: ignore[return-value]


def _make_elementwise(op: OpKind):  # noqa: ANN202 - builds a method
    arity = ELEMENTWISE[op].arity

    def method(self: Ops, *operands: Operand) -> Value:
        if op is OpKind.ADDCMUL and len(operands) == 3:
            operands = (*operands, 1.0)
        if len(operands) != arity:
            raise DefinitionError(f"{op.value}: takes {arity} operands, got {len(operands)}")
        ids = [self._fd._value_id(v, op.value) for v in operands]
        return self._one(op, self._promote_ranks(ids), NoAttrs())

    method.__name__ = op.value
    method.__doc__ = f"Elementwise {op.value} ({arity} operand{'s' if arity > 1 else ''})."
    return method


for _op in ELEMENTWISE:
    setattr(Ops, _op.value, _make_elementwise(_op))


def _make_reduction(op: OpKind):  # noqa: ANN202 - builds a method
    def method(
        self: Ops,
        arg: Value,
        dims: Any = None,
        keepdim: bool = False,
        dtype: DataType | None = None,
        *,
        axes: Any = None,
        dim: Any = None,
    ) -> Tensor:
        if isinstance(dims, DataType) and dtype is None:  # nvFuser's prod(t, dtype): every dim
            dims, dtype = None, dims
        return Tensor(
            self._fd, self._reduce(op, arg, _dims_given(dims, axes, dim), keepdim, dtype=dtype)[0]
        )

    method.__name__ = op.value
    method.__doc__ = (
        f"{op.value} over `dims` (or nvFuser's spellings `axes`, `dim`; None: every dim); "
        "dtype=None (nvFuser's DataType.Null) keeps the input's."
    )
    return method


for _op in (OpKind.SUM, OpKind.PROD, OpKind.MAX, OpKind.MIN, OpKind.MEAN):
    setattr(Ops, _op.value, _make_reduction(_op))
