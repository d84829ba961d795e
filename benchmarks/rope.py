"""Rotary position embeddings, both layouts, against torch.compile and a copy (GPU): a case
no scheduler was shaped for (its short innermost pairs, its cat along the last dim).

    python3 benchmarks/rope.py [--shape B S H D] [--dtype bfloat16] [--rounds 5] [split=0,rows=4 ...]

- neox: x [B, S, H, D], rotated by halves (cat([-x2, x1])), cos and sin [S, D];
- gptj: x [B, S, H, D / 2, 2], rotated by pairs (the pair's two results cat along the last dim),
  cos and sin [S, D / 2].
Each variant is a comma-separated list of name=value changes to the default params (as
benchmarks/ab.py spells them); the rounds alternate default, variants, torch.compile and the
copy, so that drift hits them all alike.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from run import timed  # noqa: E402

from tunefuse import DataType, FusionDefinition  # noqa: E402
from tunefuse.runtime.executor import Executor  # noqa: E402
from tunefuse.schedulers import scheduler_for, with_values  # noqa: E402


def neox(fd: FusionDefinition, dtype: DataType, b: int, s: int, h: int, d: int) -> None:
    x = fd.define_tensor(shape=[b, s, h, d], dtype=dtype)
    cos, sin = (fd.define_tensor(shape=[s, d], dtype=dtype) for _ in range(2))
    x1 = fd.ops.slice(x, [0, 0, 0, 0], [b, s, h, d // 2])
    x2 = fd.ops.slice(x, [0, 0, 0, d // 2], [b, s, h, d])
    rotated = fd.ops.cat([fd.ops.neg(x2), x1], 3)
    cb, sb = (fd.ops.broadcast_in_dim(t, [b, s, h, d], [1, 3]) for t in (cos, sin))
    fd.add_output(fd.ops.add(fd.ops.mul(x, cb), fd.ops.mul(rotated, sb)))


def gptj(fd: FusionDefinition, dtype: DataType, b: int, s: int, h: int, d: int) -> None:
    x = fd.define_tensor(shape=[b, s, h, d // 2, 2], dtype=dtype)
    cos, sin = (fd.define_tensor(shape=[s, d // 2], dtype=dtype) for _ in range(2))
    x0 = fd.ops.squeeze(fd.ops.slice(x, [0, 0, 0, 0, 0], [b, s, h, d // 2, 1]), [4])
    x1 = fd.ops.squeeze(fd.ops.slice(x, [0, 0, 0, 0, 1], [b, s, h, d // 2, 2]), [4])
    cb, sb = (fd.ops.broadcast_in_dim(t, [b, s, h, d // 2], [1, 3]) for t in (cos, sin))
    o0 = fd.ops.sub(fd.ops.mul(x0, cb), fd.ops.mul(x1, sb))
    o1 = fd.ops.add(fd.ops.mul(x0, sb), fd.ops.mul(x1, cb))
    halves = [fd.ops.broadcast_in_dim(o, [b, s, h, d // 2, 1], [0, 1, 2, 3]) for o in (o0, o1)]
    fd.add_output(fd.ops.cat(halves, 4))


def torch_neox(x, cos, sin):  # noqa: ANN001, ANN201
    d = x.shape[-1]
    rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


def torch_gptj(x, cos, sin):  # noqa: ANN001, ANN201
    x0, x1 = x[..., 0], x[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1)


def executor(fd: FusionDefinition, spec: str | None) -> Executor:
    def params(segment, device):  # noqa: ANN001, ANN202
        p = scheduler_for(segment.scheduler).default_params(segment, device)
        if not spec:
            return p
        changes = {}
        for item in spec.split(","):
            name, _, text = item.partition("=")
            changes[name] = text == "True" if text in ("True", "False") else int(text)
        p = with_values(p, changes)
        why = scheduler_for(segment.scheduler).is_valid(segment, device, p)
        if why is not None:
            raise SystemExit(f"{spec}: not valid here ({why})")
        return p

    return Executor(fd.fusion, params_source=params)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", nargs=4, type=int, default=[4, 2048, 32, 128])
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("variants", nargs="*")
    args = parser.parse_args()
    b, s, h, d = args.shape
    dtype = DataType(args.dtype)
    tdtype = getattr(torch, {"float": "float32"}.get(args.dtype, args.dtype))
    x = torch.randn(b, s, h, d, device="cuda").to(tdtype)
    cos, sin = (torch.randn(s, d, device="cuda").to(tdtype) for _ in range(2))
    layouts = {
        "neox": (neox, torch_neox, [x, cos, sin]),
        "gptj": (
            gptj,
            torch_gptj,
            [
                x.view(b, s, h, d // 2, 2),
                cos[:, : d // 2].contiguous(),
                sin[:, : d // 2].contiguous(),
            ],
        ),
    }
    for layout, (define, reference, inputs) in layouts.items():
        with FusionDefinition() as fd:
            define(fd, dtype, b, s, h, d)
        want = reference(*(t.float() for t in inputs))
        calls = {}
        for spec in [None, *args.variants]:
            ex = executor(fd, spec)
            got = ex.run(inputs)[0].float()
            # The fusion rounds each op to its dtype, the reference computes in float.
            worst = float((got - want).abs().max())
            if worst > 2**-5 * max(1.0, float(want.abs().max())):
                raise SystemExit(f"{layout} {spec or 'default'}: off by {worst}")
            calls[spec or "default"] = lambda ex=ex: ex.run(inputs)
        compiled = torch.compile(reference)
        compiled(*inputs)
        calls["torch.compile"] = lambda: compiled(*inputs)
        out = torch.empty_like(x)
        calls["copy"] = lambda: out.copy_(x)
        times: dict[str, list[float]] = {label: [] for label in calls}
        for _ in range(args.rounds):
            for label, call in calls.items():
                times[label].append(timed(call))
        for label, ts in times.items():
            print(
                f"{layout} {args.dtype} {b}x{s}x{h}x{d} {label:28s} {statistics.median(ts):7.1f} us"
            )


if __name__ == "__main__":
    main()
