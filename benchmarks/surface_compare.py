"""Two surface runs side by side (no GPU): the cells both hold, by pattern, with the geomean of
tunefuse / torch.compile in each and every cell whose tunefuse time moved by more than a
threshold. Runs on different days drift alike on both sides of a ratio, but torch.compile has
bad cells of its own; compare tunefuse's µs too, and re-time a moved cell alternately
(ab.py) before believing it.

    python3 benchmarks/surface_compare.py OLD/surface.json NEW/surface.json [--moved 0.08]
        [--patterns col row]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib


def cells(path: pathlib.Path) -> dict[tuple, dict]:
    doc = json.loads(path.read_text())
    listed = doc["cells"] if isinstance(doc, dict) else doc
    return {(c["pattern"], c["dtype"], c["mbytes"], tuple(c["shape"])): c for c in listed}


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=pathlib.Path)
    parser.add_argument("new", type=pathlib.Path)
    parser.add_argument("--moved", type=float, default=0.08, help="relative change to list")
    parser.add_argument("--patterns", nargs="+", default=None)
    args = parser.parse_args()
    old, new = cells(args.old), cells(args.new)
    both = [k for k in new if k in old]
    patterns = args.patterns or sorted({k[0] for k in both})
    for pattern in patterns:
        keys = [k for k in both if k[0] == pattern]
        if not keys:
            print(f"{pattern}: no cell in both runs")
            continue
        before = geomean([old[k]["ratio_to_compile"] for k in keys])
        after = geomean([new[k]["ratio_to_compile"] for k in keys])
        print(
            f"{pattern}: {len(keys)} cells, geomean tunefuse/torch.compile {before:.3f} -> "
            f"{after:.3f}, worst now {max(new[k]['ratio_to_compile'] for k in keys):.2f}"
        )
        for k in keys:
            a, b = old[k], new[k]
            if abs(b["tunefuse_us"] / a["tunefuse_us"] - 1) > args.moved:
                shape = "x".join(map(str, k[3]))
                print(
                    f"  {k[1]} {k[2]} MB {shape}: tunefuse {a['tunefuse_us']:.1f} -> "
                    f"{b['tunefuse_us']:.1f} us, torch.compile {a['compile_us']:.1f} -> "
                    f"{b['compile_us']:.1f}, ratio {a['ratio_to_compile']:.2f} -> "
                    f"{b['ratio_to_compile']:.2f}"
                )


if __name__ == "__main__":
    main()
