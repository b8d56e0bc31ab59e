"""``ringleader plan --plot``: throughput and efficiency against N, as SVG or PNG.

Why matplotlib, imported here only: it is the plotting library users have, and it
costs a second to import, which a plan without a chart should not pay.
"""

from __future__ import annotations

from pathlib import Path

from ringleader.planner.model import Knee, Prediction

FORMATS = (".svg", ".png")


def plot(predictions: list[Prediction], found: Knee, path: Path, title: str) -> None:
    """Samples/s (predicted and ideal) and efficiency per N, the knee marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = [p.ranks for p in predictions]
    single = predictions[0].samples_per_s / predictions[0].ranks
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    left.plot(ranks, [p.samples_per_s for p in predictions], "o-", label="predicted")
    left.plot(ranks, [single * n for n in ranks], "--", color="grey", label="ideal (linear)")
    left.set(xlabel="ranks (N)", ylabel="samples/s", title="Throughput")
    right.plot(ranks, [100 * p.efficiency for p in predictions], "o-", color="tab:orange")
    right.axhline(100 * found.threshold, color="grey", linestyle=":", label="knee threshold")
    right.set(xlabel="ranks (N)", ylabel="efficiency (%)", ylim=(0, 105), title="Efficiency")
    if found.ranks is not None:
        for axis in (left, right):
            axis.axvline(found.ranks, color="tab:red", alpha=0.4, label=f"knee: N={found.ranks}")
    left.legend()
    right.legend()
    fig.suptitle(title)
    fig.savefig(path, format=path.suffix[1:])
    plt.close(fig)
