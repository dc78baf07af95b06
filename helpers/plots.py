"""Plots the labs show: training curves against a baseline, and side-by-side bars."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import Patch


def training_curves(results: dict, baseline_accuracy: float | None = None, title: str = "Training"):
    """Loss and validation accuracy against step for one or more runs (``{"label": JobResult}``)."""
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 3.6))
    for label, result in results.items():
        steps, loss = result.curve("train", "train_loss")
        (line,) = ax_loss.plot(steps, loss, label=f"{label} train")
        steps, val = result.curve("eval", "val_loss")
        ax_loss.plot(steps, val, "o--", color=line.get_color(), label=f"{label} validation")
        steps, acc = result.curve("eval", "val_accuracy")
        ax_acc.plot(steps, acc, "o-", color=line.get_color(), label=label)
    if baseline_accuracy is not None:
        ax_acc.axhline(baseline_accuracy, color="grey", ls=":", label="TF-IDF baseline")
    ax_loss.set(xlabel="step", ylabel="cross-entropy", title="Loss")
    ax_acc.set(xlabel="step", ylabel="accuracy", title="Validation accuracy", ylim=(0, 1))
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def bars(
    labels: Sequence[str],
    values: Sequence[float],
    ylabel: str,
    title: str = "",
    annotate: str = "{:.0f}",
    reference: float | None = None,
    reference_label: str = "",
):
    """One bar per configuration, its value written on top; an optional reference line."""
    fig, ax = plt.subplots(figsize=(max(4.5, 1.2 * len(labels)), 3.4))
    drawn = ax.bar(labels, values, color="#4C72B0")
    for bar, value in zip(drawn, values):
        ax.annotate(
            annotate.format(value),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    if reference is not None:
        ax.axhline(reference, color="grey", ls=":", label=reference_label)
        ax.legend(fontsize=8)
    ax.set(ylabel=ylabel, title=title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def class_counts(counts: dict[str, int], title: str = "Rows per category"):
    """The long tail: categories sorted by size, coloured by vertical (fashion, beauty, life)."""
    items = sorted(counts.items(), key=lambda kv: -kv[1])
    colours = {"fashion": "#4C72B0", "beauty": "#DD8452", "life": "#55A868"}
    fig, ax = plt.subplots(figsize=(11, 3.2))
    ax.bar(range(len(items)), [n for _, n in items], color=[colours.get(c.split(" > ")[0], "grey") for c, _ in items])
    ax.set_xticks(range(len(items)), [c.split(" > ")[-1] for c, _ in items], rotation=75, fontsize=7)
    ax.set(ylabel="rows", title=title)
    # an empty bar() has no patch to carry its colour into the legend: hand the legend coloured patches
    ax.legend(handles=[Patch(color=colour, label=vertical) for vertical, colour in colours.items()], fontsize=8)
    fig.tight_layout()
    return fig


def stacked_bars(
    labels: Sequence[str],
    parts: dict[str, Sequence[float]],
    ylabel: str,
    title: str = "",
    side: tuple[Sequence[float], str, str] | None = None,
):
    """One stacked bar per configuration (``parts``: component -> values), and optionally a plain bar chart of
    another figure beside it (``side``: values, its y label, its title), e.g. bytes per rank next to step time."""
    fig, axes = plt.subplots(1, 2 if side else 1, figsize=(11 if side else 6, 3.8), squeeze=False)
    ax = axes[0][0]
    bottom = [0.0] * len(labels)
    for name, values in parts.items():
        ax.bar(labels, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    if side:
        values, side_label, side_title = side
        drawn = axes[0][1].bar(labels, values, color="#4C72B0")
        for bar, value in zip(drawn, values):
            axes[0][1].annotate(
                f"{value:.0f}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=9,
            )
        axes[0][1].set(ylabel=side_label, title=side_title)
        axes[0][1].tick_params(axis="x", rotation=30)
        axes[0][1].grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
