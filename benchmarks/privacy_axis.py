"""The grid's client-level DP axis: each strategy at each noise multiplier, and accuracy against the epsilon spent.

``compare_strategies.py --dp-noise 0,0.5,1,2`` runs every strategy once per noise multiplier z
(with ``--dp-clip``, the run's sampling and delta): the arm ``fedavg@z=0.5`` is ``fedavg`` with
``dp_noise=0.5``, named ``fedavg z=0.5`` in folders and tables. `privacy_figure` draws each
strategy's accuracy against the epsilon its runs spent, one curve per strategy; z = 0 spends an
infinite epsilon and is drawn as the strategy's line without noise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

#: What joins a strategy and its noise multiplier in an arm.
NOISE_MARK = "@z="


def noise_arms(arms: list[str], noises: list[float] | None) -> list[str]:
    """Return the grid's arms: ``arms`` as they are, or each at each of ``noises``."""
    if not noises:
        return list(arms)
    return [f"{arm}{NOISE_MARK}{noise:g}" for arm in arms for noise in noises]


def split_arm(arm: str) -> tuple[str, float | None]:
    """Return an arm's strategy and noise multiplier (``None`` without DP).

    Examples
    --------
    >>> split_arm("fedavg@z=0.5"), split_arm("fedprox")
    (('fedavg', 0.5), ('fedprox', None))
    """
    base, mark, noise = arm.partition(NOISE_MARK)
    return base, float(noise) if mark else None


def noise_label(name: str, noise: float | None) -> str:
    """Return how tables name a strategy at a noise multiplier: ``fedavg z=0.5``."""
    return name if noise is None else f"{name} z={noise:g}"


def epsilon_text(epsilon: float) -> str:
    """Return an epsilon as tables show it: three decimals, or "∞" where no noise was added."""
    return "∞" if math.isinf(epsilon) else f"{epsilon:.3f}"


def privacy_figure(path: Path, plan: dict, rows: list[dict], colors: dict, title: str) -> Path:
    """Draw final and best accuracy against the epsilon spent: one curve per strategy, over its noise levels.

    ``rows`` are the grid's table rows (with ``epsilon`` and the strategy's ``base`` name);
    a run without noise (infinite epsilon) is a dashed line of its strategy's colour.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    from partitions.figure_file import save_figure

    figure = Figure(figsize=(11, 4))
    axes = figure.subplots(1, 2, sharey=True)
    for axis, key, heading in ((axes[0], "final_acc", "final"), (axes[1], "best_acc", "best")):
        for base in dict.fromkeys(row["base"] for row in rows):
            mine = [row for row in rows if row["base"] == base and row["seeds"]]
            noisy = sorted((row for row in mine if math.isfinite(row["epsilon"])), key=lambda row: row["epsilon"])
            color = colors.get(noisy[0]["strategy"] if noisy else mine[0]["strategy"]) if mine else None
            if noisy:
                axis.errorbar([row["epsilon"] for row in noisy], [row[key] for row in noisy],
                              yerr=[row[f"{key}_std"] for row in noisy], marker="o", capsize=3, color=color,
                              label=base)
                for row in noisy:
                    axis.annotate(f"z={row['noise']:g}", (row["epsilon"], row[key]), textcoords="offset points",
                                  xytext=(4, 4), fontsize=7)
            for row in (row for row in mine if not math.isfinite(row["epsilon"])):
                axis.axhline(row[key], linestyle="--", color=color, linewidth=1, label=f"{base}, no noise")
        axis.set_xscale("log")
        spent = sorted({row["epsilon"] for row in rows if math.isfinite(row["epsilon"])})
        axis.set_xticks(spent, [f"{epsilon:.3g}" for epsilon in spent])  # the epsilons the runs spent
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel(f"epsilon at delta = {plan['dp']['delta']:g} after the run")
        axis.set_ylabel(f"{heading} test accuracy")
        axis.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    save_figure(figure, path, dpi=120)
    return path


def mean_epsilon(runs: list[dict]) -> float:
    """Return the epsilon the runs of one cell spent (the same for every seed), NaN without DP."""
    # summary.json writes an infinite epsilon (no noise) as null: JSON has no infinity
    spent = [math.inf if run["summary"]["dp_epsilon"] is None else run["summary"]["dp_epsilon"]
             for run in runs if "dp_epsilon" in run["summary"]]
    return float(np.mean(spent)) if spent else math.nan
