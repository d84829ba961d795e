"""The errors tunefuse raises. Each names what was wrong: the op, the operand, the dimension."""

from __future__ import annotations


class TunefuseError(Exception):
    """Base of every error tunefuse raises on purpose."""


class DefinitionError(TunefuseError, ValueError):
    """A fusion definition is malformed: bad op arguments, dtypes, dims."""


class CompletedDefinitionError(DefinitionError, RuntimeError):
    """An op added to a definition already complete (after its `with` block, or from an
    nvFuser `schedule()`); a RuntimeError too, as nvFuser raises one."""


class LegacyRuleError(DefinitionError, RuntimeError):
    """A definition nvFuser's legacy frontend refuses (its slice bounds rules), refused in its
    words, as a RuntimeError too (nvFuser's kind)."""


class MissingDefinitionError(DefinitionError, NotImplementedError):
    """A FusionDefinition run with no definition: neither a `with` block nor a `definition()`
    method filled it (a NotImplementedError too, as nvFuser's)."""


class NotBuiltError(DefinitionError, AttributeError):
    """An nvFuser op tunefuse declines on purpose (`fd.ops.cumsum`): the error names it and
    says why; an AttributeError too, so `hasattr(fd.ops, "cumsum")` is False."""


class ShapeError(DefinitionError):
    """Extents that cannot work: mismatched ranks, incompatible sizes, impossible reshapes."""


class SerializationError(TunefuseError, ValueError):
    """Fusion JSON that is malformed, of an unknown version, or inconsistent."""


class InputMismatchError(TunefuseError, ValueError):
    """Inputs given to a fusion do not match its definition."""


class ExecutionError(TunefuseError, RuntimeError):
    """A fusion could not run: no device, compile failure, launch failure."""


class NoProfileError(ExecutionError, ValueError):
    """`fd.profile()` before any `execute(..., profile=True)` (a ValueError too, as nvFuser's)."""


class IndexOutOfRangeError(TunefuseError, IndexError):
    """An index tensor (index_select, gather, embedding) holds a value outside the extent
    of the table it indexes. The GPU never reads there: the element is not loaded, and the
    run raises this instead of returning it."""


class StopRequested(Exception):
    """The tuning daemon is shutting down: a running tuning gives its job back. Not a
    TunefuseError: nothing went wrong."""
