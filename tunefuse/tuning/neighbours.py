"""The points around a params value that the tuner measures before its sampler's own: a
local search the sampler then continues from.

A scheduler's space is a product of categoricals (threads, rows a block, vector, unroll,
split, ...) with thousands of points, most of them slow and many invalid; 30 trials of a
random start and TPE rarely land next to the default, where a better point most often
lies (one parameter one step away, or a block of the same size shaped otherwise). So the
tuner enqueues, after the default, the default's neighbours; and each time a trial beats
the best so far, that trial's neighbours: a coordinate descent inside the Optuna study.
"""

from __future__ import annotations

from typing import Any


def neighbours(
    segment: Any, device: Any, params: Any, space: dict, dtypes: dict, trades: tuple = ()
) -> list:
    """`params` changed in one way each, valid and in `space`, each a kernel of its own: each
    code-generation flag flipped (schedulers.common.FLAGS), then each ordered parameter
    one choice down and one up (a bool flipped), then each of `trades` (pairs of
    parameters whose product is a block's size or a row's share: one a step up, the other
    a step down, both ways). Two params of one kernel (`codegen.code_identity`; `dtypes`
    the plan's buffers') are measured once."""
    from tunefuse.codegen import code_identity, generate
    from tunefuse.schedulers import scheduler_for, value_of, with_values
    from tunefuse.schedulers.common import FLAGS

    sched = scheduler_for(segment.scheduler)
    flags = [n for n in space if n.rsplit(".", 1)[-1] in FLAGS]
    ordered = [n for n in space if n not in flags]
    moves: list[dict] = [{n: not value_of(params, n)} for n in flags]
    for name in ordered:
        for step in (-1, 1):
            value = _step(space[name].choices, value_of(params, name), step)
            if value is not None:
                moves.append({name: value})
    for a, b in trades:
        if a not in space or b not in space:
            continue
        for step in (-1, 1):
            up = _step(space[a].choices, value_of(params, a), step)
            down = _step(space[b].choices, value_of(params, b), -step)
            if up is not None and down is not None:
                moves.append({a: up, b: down})
    out, seen = [], {code_identity(generate(segment, params, device, dtypes))}
    for move in moves:
        if any(value not in space[name].choices for name, value in move.items()):
            continue
        candidate = with_values(params, move)
        if sched.is_valid(segment, device, candidate) is not None:
            continue
        kernel = code_identity(generate(segment, candidate, device, dtypes))
        if kernel in seen:
            continue
        seen.add(kernel)
        out.append(candidate)
    return out


def _step(choices: Any, value: Any, step: int) -> Any:
    """The choice `step` places from `value` among sorted numeric `choices` (a bool: the
    other one, for either step); None past either end or where `value` is not a choice."""
    if isinstance(value, bool):
        return (not value) if step > 0 else None
    numbers = sorted(c for c in choices if isinstance(c, int) and not isinstance(c, bool))
    if value not in numbers:
        return None
    at = numbers.index(value) + step
    return numbers[at] if 0 <= at < len(numbers) else None
