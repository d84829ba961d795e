"""Index algebra: how movement ops map an output element's index to their source's index.

An index is a tuple of `Affine` expressions over iteration variables (one per dim of the
space a kernel iterates over). Movement ops (permute, broadcast, expand, squeeze, slice,
reshape) rewrite such tuples; a reshape linearizes and unravels, which introduces floor
division and modulo, and the simplifier removes them wherever bounds allow, the way
tinygrad's symbolic does. A load whose offset stays affine is a strided view; one that
keeps a `Div`/`Mod` needs index arithmetic in the kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from tunefuse.ir.ops import OpKind
from tunefuse.ir.shapes import ReshapeAnalysis, ViewKind


@dataclass(frozen=True, slots=True, order=True)
class Var:
    """Iteration variable k, ranging over [0, extent)."""

    k: int
    extent: int

    def __repr__(self) -> str:
        return f"i{self.k}"


@dataclass(frozen=True, slots=True)
class Div:
    x: Affine
    c: int

    def __repr__(self) -> str:
        return f"({self.x!r})//{self.c}"


@dataclass(frozen=True, slots=True)
class Mod:
    x: Affine
    c: int

    def __repr__(self) -> str:
        return f"({self.x!r})%{self.c}"


Atom = Union[Var, Div, Mod]


def _atom_key(atom: Atom) -> tuple:
    return (type(atom).__name__, repr(atom))


@dataclass(frozen=True, slots=True)
class Affine:
    """const + sum(coeff * atom); terms sorted, no zero coefficients: canonical."""

    terms: tuple[tuple[Atom, int], ...] = ()
    const: int = 0

    @property
    def is_affine(self) -> bool:
        """True when every atom is a plain variable (no div/mod)."""
        return all(isinstance(a, Var) for a, _ in self.terms)

    def coeff(self, var: Var) -> int:
        return dict(self.terms).get(var, 0)

    def bounds(self) -> tuple[int, int]:
        lo = hi = self.const
        for atom, c in self.terms:
            a_lo, a_hi = atom_bounds(atom)
            lo += min(c * a_lo, c * a_hi)
            hi += max(c * a_lo, c * a_hi)
        return lo, hi

    def __repr__(self) -> str:
        parts = [f"{c}*{a!r}" if c != 1 else repr(a) for a, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


def atom_bounds(atom: Atom) -> tuple[int, int]:
    if isinstance(atom, Var):
        return 0, max(atom.extent - 1, 0)
    lo, hi = atom.x.bounds()
    if isinstance(atom, Div):
        return lo // atom.c, hi // atom.c
    if lo >= 0 and hi < atom.c:
        return lo, hi
    return 0, atom.c - 1


def const(value: int) -> Affine:
    return Affine((), int(value))


def var(v: Var) -> Affine:
    return Affine(((v, 1),), 0) if v.extent != 1 else const(0)


def _make(terms: dict, constant: int) -> Affine:
    terms = {a: c for a, c in terms.items() if c != 0}
    # c*m*(x//c) + m*(x%c) == m*x: put the pair back together.
    changed = True
    while changed:
        changed = False
        for atom, m in list(terms.items()):
            if isinstance(atom, Mod):
                partner = _div_atom(atom.x, atom.c)
                if terms.get(partner) == m * atom.c:
                    del terms[atom], terms[partner]
                    for a, c in atom.x.terms:
                        terms[a] = terms.get(a, 0) + m * c
                    constant += m * atom.x.const
                    terms = {a: c for a, c in terms.items() if c != 0}
                    changed = True
                    break
    ordered = tuple(sorted(terms.items(), key=lambda t: _atom_key(t[0])))
    return Affine(ordered, constant)


def _div_atom(x: Affine, c: int) -> Div:
    """The atom of x // c, a quotient of a quotient as one: (y // a) // c is y // (a * c).
    A reshape's unravel writes each digit of a position p as (p // s) % e, the top one as
    p // S; this form lets `_make` put the digits of a contiguous tensor back together."""
    if x.const == 0 and len(x.terms) == 1:
        ((inner, k),) = x.terms
        if k == 1 and isinstance(inner, Div):
            return Div(inner.x, inner.c * c)
    return Div(x, c)


def add(*xs: Affine) -> Affine:
    terms: dict = {}
    constant = 0
    for x in xs:
        for a, c in x.terms:
            terms[a] = terms.get(a, 0) + c
        constant += x.const
    return _make(terms, constant)


def scale(x: Affine, k: int) -> Affine:
    return _make({a: c * k for a, c in x.terms}, x.const * k)


def _split(x: Affine, c: int) -> tuple[Affine, Affine]:
    """x = hi + lo, where every coefficient of hi (and its constant) is a multiple of c."""
    hi_terms = {a: k for a, k in x.terms if k % c == 0}
    lo_terms = {a: k for a, k in x.terms if k % c != 0}
    return _make(hi_terms, x.const - x.const % c), _make(lo_terms, x.const % c)


def floordiv(x: Affine, c: int) -> Affine:
    if c == 1:
        return x
    lo_b, hi_b = x.bounds()
    if 0 <= lo_b and hi_b < c:
        return const(0)
    hi, lo = _split(x, c)
    whole = _make({a: k // c for a, k in hi.terms}, hi.const // c)  # hi // c, exact
    l_lo, l_hi = lo.bounds()
    if 0 <= l_lo and l_hi < c:
        return whole
    if hi.terms and l_lo >= 0:
        # (hi + lo) // c == hi // c + lo // c where c divides hi: 25088*i1 + i2 over 3136 is
        # 8*i1 + i2 // 3136 (lo never negative: C's division truncates toward zero).
        return add(whole, _make({_div_atom(lo, c): 1}, 0))
    return _make({_div_atom(x, c): 1}, 0)


def mod(x: Affine, c: int) -> Affine:
    if c == 1:
        return const(0)
    lo_b, hi_b = x.bounds()
    if 0 <= lo_b and hi_b < c:
        return x
    hi, lo = _split(x, c)
    l_lo, l_hi = lo.bounds()
    if 0 <= l_lo and l_hi < c:
        return lo
    if hi.terms and l_lo >= 0:  # (hi + lo) % c == lo % c (lo never negative, as C's %)
        return _make({Mod(lo, c): 1}, 0)
    return _make({Mod(x, c): 1}, 0)


Index = tuple[Affine, ...]
ZERO = const(0)


def linearize(index: Sequence[Affine], shape: Sequence[int]) -> Affine:
    """Row-major position of `index` in `shape`."""
    total = ZERO
    stride = 1
    for i, e in zip(reversed(index), reversed(shape)):
        total = add(total, scale(i, stride))
        stride *= e
    return total


def unravel(position: Affine, shape: Sequence[int]) -> Index:
    """The index of row-major `position` in `shape`."""
    if 0 in shape:  # no element: no position to unravel (and no stride to divide by)
        return tuple(ZERO for _ in shape)
    out = []
    stride = 1
    strides = []
    for e in reversed(shape):
        strides.append(stride)
        stride *= e
    strides.reverse()
    for d, e in enumerate(shape):
        out.append(
            ZERO
            if e == 1
            else mod(floordiv(position, strides[d]), e)
            if d
            else floordiv(position, strides[d])
        )
    return tuple(out)


def offset_of(index: Sequence[Affine], strides: Sequence[int], base: int = 0) -> Affine:
    """Element offset of `index` in a buffer with `strides`."""
    return add(const(base), *(scale(i, s) for i, s in zip(index, strides)))


def source_index(
    op: OpKind,
    attrs: object,
    out_index: Index,
    src_shape: Sequence[int],
    out_shape: Sequence[int],
    reshape: ReshapeAnalysis | None = None,
) -> Index:
    """The index into a movement op's source that `out_index` (of its output) reads."""
    if op is OpKind.PERMUTE:
        src: list[Affine] = [ZERO] * len(src_shape)
        for k, d in enumerate(attrs.dims):  # type: ignore[attr-defined]
            src[d] = out_index[k]
        return tuple(src)
    if op is OpKind.BROADCAST_IN_DIM:
        return tuple(
            ZERO if src_shape[j] == 1 else out_index[d]
            for j, d in enumerate(attrs.broadcast_dims)  # type: ignore[attr-defined]
        )
    if op is OpKind.BROADCAST:
        return tuple(i for i, b in zip(out_index, attrs.is_broadcast_dim) if not b)  # type: ignore[attr-defined]
    if op is OpKind.EXPAND:
        return tuple(ZERO if s == 1 else i for i, s in zip(out_index, src_shape))
    if op is OpKind.SQUEEZE:
        it = iter(out_index)
        return tuple(ZERO if d in attrs.dims else next(it) for d in range(len(src_shape)))  # type: ignore[attr-defined]
    if op is OpKind.UNSQUEEZE:
        return tuple(i for d, i in enumerate(out_index) if d != attrs.dim)  # type: ignore[attr-defined]
    if op is OpKind.SLICE:
        return tuple(
            add(const(start), scale(i, step))
            for i, start, step in zip(out_index, attrs.start_indices, attrs.strides)  # type: ignore[attr-defined]
        )
    if op is OpKind.RESHAPE:
        assert reshape is not None
        src = [ZERO] * len(src_shape)
        for t in reshape.transforms:
            if t.kind in (ViewKind.SQUEEZE, ViewKind.BROADCAST):
                continue
            if t.kind is ViewKind.KEEP:
                src[t.in_dims[0]] = out_index[t.out_dims[0]]
                continue
            position = linearize(
                [out_index[d] for d in t.out_dims], [out_shape[d] for d in t.out_dims]
            )
            for d, i in zip(t.in_dims, unravel(position, [src_shape[d] for d in t.in_dims])):
                src[d] = i
        return tuple(src)
    raise AssertionError(f"{op} is not a movement op")  # pragma: no cover
