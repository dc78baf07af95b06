"""Every figure the labs draw, in one place; the modules that measure or plan compute, and these draw.

Each function takes numbers, rows or a result object and returns the matplotlib figure: curves and bars for any lab,
the scaling plan (lab 02), input modes on a timeline (lab 05), the interruption drill and checkpoint interval (lab 06),
utilisation heatmaps (lab 07). It reads only the input-mode table (each mode's colour), so any module can hand it
a figure.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from helpers.input_mode import MODES


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
    reference: tuple[float, str] | None = None,
):
    """One stacked bar per configuration (``parts``: component -> values), and optionally a plain bar chart of
    another figure beside it (``side``: values, its y label, its title), e.g. bytes per rank next to step time, and a
    dotted reference line across the stacks (``reference``: value, label)."""
    fig, axes = plt.subplots(1, 2 if side else 1, figsize=(11 if side else 6, 3.8), squeeze=False)
    ax = axes[0][0]
    bottom = [0.0] * len(labels)
    for name, values in parts.items():
        ax.bar(labels, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    if reference is not None:
        ax.axhline(reference[0], color="grey", ls=":", label=reference[1])
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", rotation=30)
    beside = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if reference else {}  # off the line and the stacks
    ax.legend(fontsize=8, **beside)
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


# ---------------------------------------------------------------------------------------------- lab 02: scaling
def scaling_plan(plans: dict[str, list], case_studies: Sequence = (), title: str = "Scaling plan (a model)"):
    """Lab 02's planner (:mod:`helpers.planning.scaling`): ``plans`` maps a label to one instance type's
    predictions for 1...N instances, ``case_studies`` are its published figures (``scaling.CASE_STUDIES``).
    Left: time to train against dollars, one line per instance type, points labelled with the instance count.
    Right: predicted scaling efficiency against GPUs, with the case studies' published figures beside it."""
    fig, (ax_cost, ax_eff) = plt.subplots(1, 2, figsize=(13, 4.2))
    for label, preds in plans.items():
        priced = [p for p in preds if p.usd is not None]
        if priced:
            (line,) = ax_cost.plot([p.usd for p in priced], [p.train_h for p in priced], "o-", label=label)
            for p in priced:
                ax_cost.annotate(
                    f"{p.instances}x",
                    (p.usd, p.train_h),
                    textcoords="offset points",
                    xytext=(4, 3),
                    fontsize=7,
                    color=line.get_color(),
                )
        ax_eff.plot([p.gpus for p in preds], [p.efficiency for p in preds], "o-", label=label)
    for c in case_studies:
        ax_eff.scatter(
            [c.gpus],
            [c.efficiency],
            marker="^" if c.lower_bound else "*",
            s=90,
            zorder=5,
            edgecolor="black",
            label=f"{c.name}{' (at least)' if c.lower_bound else ''}",
        )
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    some = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")  # minor ticks: 2s and 5s only
    ax_cost.set(
        xscale="log",
        yscale="log",
        xlabel="cost of the run (USD, on-demand)",
        ylabel="time to train (hours)",
        title="Time against money",
    )
    ax_eff.set(
        xlabel="GPUs",
        ylabel="scaling efficiency (1.0 = linear)",
        title="Efficiency",
        ylim=(0, max([1.2, *(c.efficiency + 0.1 for c in case_studies)])),
    )
    ax_eff.set_xscale("log", base=2)
    ax_eff.axhline(1.0, color="grey", ls=":", lw=1)
    for axis in (ax_cost.xaxis, ax_cost.yaxis, ax_eff.xaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(FuncFormatter(lambda v, _: "") if axis is ax_eff.xaxis else some)
    ax_cost.legend(fontsize=7)
    ax_eff.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in (ax_cost, ax_eff):
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------- lab 05: input modes


def _mode_colour(name: str) -> str:
    return MODES[name].colour if name in MODES else "grey"


def input_mode_timeline(rows: list[dict], title: str = "One job per input mode"):
    """Stacked bars per mode: input staging, start to first training step, the rest; bytes fetched beside. ``rows``:
    :func:`sagemaker_standin.s3_inputs.job_io` figures, each with a ``label``."""
    fig, (ax, ax_bytes) = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [2.2, 1]})
    labels = [r["label"] for r in rows]
    staging = [r["staging_s"] for r in rows]
    start = [r["to_first_step_s"] - r["staging_s"] for r in rows]
    rest = [r["total_s"] - r["to_first_step_s"] for r in rows]
    ax.barh(labels, staging, color="#C44E52", label="input staged before the script starts")
    ax.barh(labels, start, left=staging, color="#8172B2", label="script start to first training step")
    ax.barh(labels, rest, left=[a + b for a, b in zip(staging, start)], color="#CCB974", label="training to the end")
    ax.invert_yaxis()
    ax.set(xlabel="seconds since the job was submitted", title=title)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    mb = [r["bytes_from_store"] / 1e6 for r in rows]
    ax_bytes.barh(labels, mb, color=[_mode_colour(r["mode"]) for r in rows])
    for y, v in enumerate(mb):
        ax_bytes.annotate(f"{v:.1f}", (v, y), va="center", fontsize=8)
    ax_bytes.invert_yaxis()
    ax_bytes.set(xlabel="MB read from the object store", title="Bytes fetched")
    ax_bytes.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def input_mode_sequence(runs: dict[str, list[float]], title: str = "A sequence of jobs on the same data"):
    """Cumulative seconds after each job of a sequence, one line per mode."""
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for mode, seconds in runs.items():
        ax.plot(
            range(1, len(seconds) + 1),
            list(itertools.accumulate(seconds)),
            "o-",
            label=mode,
            color=_mode_colour(mode),
        )
    ax.set(xlabel="job", ylabel="seconds, all jobs so far", title=title)
    ax.set_xticks(range(1, max(len(s) for s in runs.values()) + 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def input_mode_access(rows: list[dict], title: str = "Access pattern x input mode"):
    """Read throughput the script saw, and bytes fetched, per (pattern, mode)."""
    patterns = list(dict.fromkeys(r["pattern"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, (ax, ax_bytes) = plt.subplots(1, 2, figsize=(11, 3.4))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        got = {r["pattern"]: r for r in rows if r["mode"] == mode}
        x = np.arange(len(patterns)) + i * width
        colour = _mode_colour(mode)
        ax.bar(x, [got[p]["read_mb_per_s"] for p in patterns], width, label=mode, color=colour)
        ax_bytes.bar(x, [got[p]["bytes_from_store"] / 1e6 for p in patterns], width, label=mode, color=colour)
    for a in (ax, ax_bytes):
        a.set_xticks(np.arange(len(patterns)) + width * (len(modes) - 1) / 2, patterns, fontsize=8)
        a.grid(axis="y", alpha=0.3)
        a.legend(fontsize=8)
    ax.set(ylabel="MB/s the script read", title=title, yscale="log")
    ax_bytes.set(ylabel="MB fetched from the store", title="Bytes fetched (read-ahead included)")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------- lab 06: spot
def interruption_drill(drill, title: str = "Interruption drill"):
    """Steps against time for every launch of a :class:`~helpers.local.drill_verdict.Drill` (and its reference), and
    where the time went."""
    fig, (ax, ax_bars) = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [2.2, 1]})
    ref_t = [h["t"] for h in drill.reference.history if h["kind"] == "train"]
    ref_s = [h["step"] for h in drill.reference.history if h["kind"] == "train"]
    ax.plot(ref_t, ref_s, color="grey", ls="--", lw=1, label="uninterrupted reference")
    marks = {"SIGTERM": ("v", "#DD8452"), "SIGKILL": ("X", "#C44E52")}
    for s in drill.segments:
        (line,) = ax.plot([t for t, _ in s.steps], [n for _, n in s.steps], lw=1.6, label=f"launch {s.index}")
        ax.axvspan(s.start_s, s.first_step_s or s.end_s, color=line.get_color(), alpha=0.12)
        ax.plot([t for t, *_ in s.saves], [n for _, n, *_ in s.saves], "o", ms=3.5, color=line.get_color())
        if s.signalled_s is not None:
            marker, colour = marks[s.interruption.signal]
            ax.plot(s.signalled_s, s.last_step, marker, ms=10, color=colour)
            ax.annotate(
                f"{s.interruption.signal}\n{s.lost_steps} steps lost",
                (s.signalled_s, s.last_step),
                textcoords="offset points",
                xytext=(4, -22),
                fontsize=8,
                color=colour,
            )
    for before, after in zip(drill.segments, drill.segments[1:]):  # the roll back to the checkpoint resumed from
        if before.signalled_s is not None and after.first_step_s is not None:
            ax.plot(
                [before.signalled_s, after.first_step_s],
                [before.last_step, after.resumed_from],
                ":",
                color="grey",
                lw=1,
            )
    ax.set(
        xlabel="seconds since the first launch (shaded: start-up)",
        ylabel="step",
        title="Progress: dots are checkpoints",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    split = drill.time_split()
    colours = {
        "start-up": "#BBBBBB",
        "training": "#4C72B0",
        "lost work": "#C44E52",
        "saving checkpoints": "#DD8452",
    }
    bottoms = {run: 0.0 for run in split}
    for part, colour in colours.items():
        values = [split[run][part] for run in split]
        ax_bars.bar(list(split), values, bottom=[bottoms[r] for r in split], color=colour, label=part)
        for run, v in zip(split, values):
            bottoms[run] += v
    ax_bars.set(ylabel="seconds", title="Where the time went")
    ax_bars.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def checkpoint_intervals(curves: dict, title: str = ""):
    """Expected wall time against checkpoint interval, Young's interval marked on each interruption rate's curve
    (``curves``: :func:`helpers.planning.spot.interval_curves`)."""
    work_h = curves["work_h"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for c in curves["curves"]:
        (line,) = ax.plot(c["minutes"], c["hours"], label=f"{c['rate']:.3g} interruptions/h")
        if c["best"] is not None:
            ax.plot(*c["best"], "o", color=line.get_color())
    ax.axhline(work_h, color="grey", ls=":", label="the work itself")
    ax.set_ylim(work_h * 0.97, work_h * 2)  # the interesting part: near the minimum
    ax.set(
        xscale="log",
        xlabel="checkpoint every ... minutes of work",
        ylabel="expected wall hours",
        title=title or f"{work_h:g} h of training: dots mark Young's interval",
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------- lab 07: profiling
def heatmap(
    labels: list[str],
    times: list[float],
    values: list[list[float]],
    title: str = "Utilisation",
    ax=None,
    vmax: float = 100.0,
    xlabel: str = "seconds",
    interval: float | None = None,
    windows: dict[str, tuple[float, float]] | None = None,
):
    """Rows (cores, GPUs or hosts) against time, darker = busier, as SageMaker Debugger's heatmap drew them.
    ``times``: the end of each sample's interval (``interval`` long; by default the spacing of the times).
    ``windows`` (name -> (start, end) on the same clock) are marked with dashed lines."""
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 0.45 * max(2, len(labels)) + 1.4))
    if not times:
        ax.set_title(f"{title} (no samples)")
        return fig or ax.figure
    edges = _edges(times, interval)
    image = ax.pcolormesh(edges, range(len(labels) + 1), values, cmap="viridis", vmin=0, vmax=vmax, shading="flat")
    ax.set_yticks([i + 0.5 for i in range(len(labels))], labels, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel=xlabel, title=title)
    (fig or ax.figure).colorbar(image, ax=ax, label="% busy", pad=0.01)
    _mark_windows(ax, windows or {})
    if fig is not None:
        fig.tight_layout()
    return fig or ax.figure


def _edges(times: list[float], interval: float | None = None) -> list[float]:
    """Cell edges for samples taken at the end of each interval: the first cell starts one interval back."""
    step = interval or ((times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else 0.5)
    return [times[0] - step, *times]


def _mark_windows(ax, windows: dict) -> None:
    for name, (start, end) in windows.items():
        for x in (start, end):
            ax.axvline(x, color="white", ls="--", lw=1.2)
        ax.text(
            (start + end) / 2,
            0.97,
            name,
            color="white",
            ha="center",
            va="top",
            fontsize=8,
            transform=ax.get_xaxis_transform(),
        )


def compare_heatmaps(monitors: dict, title: str = "Utilisation, side by side", window: str | None = None):
    """One heatmap per run (``{"label": Monitor}``), stacked on the same colour scale and time axis; with
    ``window`` (e.g. "training"), each run's own window of that name, timed from its start."""
    rows = max(len(m.matrix()[0]) for m in monitors.values())
    fig, axes = plt.subplots(
        len(monitors), 1, figsize=(10, len(monitors) * (0.45 * max(2, rows) + 1.1)), sharex=True, squeeze=False
    )
    for ax, (label, mon) in zip(axes[:, 0], monitors.items()):
        s = mon.summary(window)
        span = f"{s.get('seconds', 0):.1f} s of {window}" if window else f"{s.get('seconds', 0):.0f} s"
        mon.heatmap(
            title=f"{label}: {span}, machine {s.get('machine_cpu_pct', 0):.0f}% busy, "
            f"job {s.get('job_cores', 0):.2f} cores",
            ax=ax,
            window=window,
        )
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")  # one shared time axis, labelled once
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def utilisation_lines(mon, title: str = ""):
    """A :class:`~helpers.local.monitor.Monitor`'s job: its CPU (in cores) and memory by role over time, and GPU
    use where there are GPUs."""
    panels = 3 if mon.gpu_names else 2
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.2))
    t = [s.t for s in mon.samples]
    ax_cpu, ax_mem = axes[0], axes[1]
    for role in mon.roles:
        if any(s.processes[role] for s in mon.samples):
            ax_cpu.plot(t, [s.cpu_by_role[role] / 100 for s in mon.samples], label=role)
            ax_mem.plot(t, [s.mem_mb_by_role[role] for s in mon.samples], label=role)
    ax_mem.plot(
        t, [sum(s.mem_mb_by_role.values()) for s in mon.samples], color="black", ls="--", lw=1, label="job total"
    )  # PSS: a worker's shared pages move from the trainer's line to its own
    ceiling = mon.budget or mon.cpu_count  # the job's own cores where the monitor knows them, else the machine's
    whose = "the job's" if mon.budget else "the machine's"
    ax_cpu.axhline(ceiling, color="grey", ls=":", label=f"{ceiling} core{'s' * (ceiling != 1)}: {whose}")
    ax_cpu.set(xlabel="seconds", ylabel="cores busy", title="Job CPU by role")
    ax_mem.set(xlabel="seconds", ylabel=f"{mon.memory_kind} (MB)", title="Job memory by role")
    if mon.gpu_names:
        for i, name in enumerate(mon.gpu_names):
            axes[2].plot(t, [s.gpu_util[i] for s in mon.samples], label=f"gpu{i}")
        axes[2].set(xlabel="seconds", ylabel="% busy", title="GPU utilisation", ylim=(0, 105))
    for ax in axes:
        for name, (start, end) in mon.windows.items():
            ax.axvspan(start, end, color="grey", alpha=0.12, lw=0, label=name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
