"""`tunefuse cache show ID --plot FILE.png`: a tuned record's search, drawn."""

from __future__ import annotations

from pathlib import Path


def plot_history(record, path: Path) -> None:  # noqa: ANN001 - a cache_db.TunedRecord
    """Trial number against measured µs; failed trials as crosses along the top, the default
    heuristic's time and the stored best as horizontal lines, the running best as a step."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    done = [(n, us) for n, us, state in record.history if state == "COMPLETE" and us is not None]
    failed = [n for n, us, state in record.history if state != "COMPLETE" or us is None]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    if done:
        xs, ys = zip(*sorted(done))
        ax.scatter(xs, ys, s=14, color="tab:blue", label="trial", zorder=3)
        running, best = [], float("inf")
        for y in ys:
            best = min(best, y)
            running.append(best)
        ax.step(xs, running, where="post", color="tab:green", label="best so far")
    if failed:
        top = max((us for _, us in done), default=1.0) * 1.05
        ax.scatter(failed, [top] * len(failed), marker="x", color="tab:red", label="failed")
    if record.default_us:
        ax.axhline(
            record.default_us,
            color="tab:gray",
            linestyle="--",
            label=f"default {record.default_us:.1f} µs",
        )
    if record.median_us:
        ax.axhline(
            record.median_us,
            color="tab:green",
            linestyle=":",
            label=f"stored best {record.median_us:.1f} µs",
        )
    ax.set_xlabel("trial")
    ax.set_ylabel("µs (median)")
    ax.set_title(
        f"record {record.id}: {record.scheduler} kernel {record.kernel_key[:12]}, shape {record.shape_key}"
    )
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
