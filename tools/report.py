#!/usr/bin/python3
"""Turns remat-bench results JSON into results/REPORT.md with tables and plots.

    /usr/bin/python3 tools/report.py [results/latest.json ...] [--compile-budget TSV] [--out results]

Each input is a file //harness:bench wrote (rows of problem x engine x
policy/schedule x size, with the command and the machine). The report is
wholly generated: its first lines give the command that wrote it (so that
tools/report_test.py can write it again and find it unchanged), then every
file, the command behind it and the platform it ran on (CPU, oneDNN's ISA
and cap, and the matmul implementations its rows executed). Each run other
than a --peer run gets its own tables, headed by its kind and ISA family (a
default run on AVX-512 and one under ONEDNN_MAX_CPU_ISA=AVX2 side by side),
since times of two runs are not comparable; the report warns when uncapped
runs differ in CPU or ISA. Rows the bench flagged as noise (physically
implausible timings) show "noise" instead of a ratio and stay out of the
time plots; the plots use the runs on the first run's ISA family.

Plots (PNG, matplotlib from Debian's python3-matplotlib; without it the
report has its tables and says the plots were skipped):
  memory_vs_depth.png       peak memory vs depth (scan_stack), per engine and policy
  tradeoff.png              time overhead vs memory saved, per policy, per problem
  peer.png                  eager and recompute vs the PyTorch peer, scan_stack
  schedules.png             the frontier: every schedule's peak vs its time
                            overhead on one case (the scheduled case with the most
                            schedules), with eager and JAX-style body checkpointing
  schedules_vs_depth.png    peak memory, and the activations in it, vs depth
                            for each schedule (scan_stack)
Sections: a table per problem; the frontier case's schedules relative to eager;
rows run at scale (//harness:bench --sweep=scale: one run each, peak by
category, refusals past --max-memory); with --compile-budget TSV,
torch.compile's activation_memory_budget against remat's memory_budget:B
(tools/torch_compile_budget.py's run: a table per problem, the gaps, and
compile_budget.png; --section-only prints that section alone).
"""

import argparse
import json
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratio_agreement import agreement  # noqa: E402

MIB = 1024.0 * 1024.0


def load(paths):
    runs = []
    for index, path in enumerate(paths):
        with open(path) as f:
            run = json.load(f)
        run["_path"] = path
        # Rows are compared with eager of the same run only (times of two runs
        # on a shared machine are not comparable).
        for row in run.get("rows", []):
            row["_run"] = index
        # The A/A controls (a second eager on the case) are evidence about
        # the run, not results: the run's line says what they found.
        run["_controls"] = [r for r in run.get("rows", []) if r.get("control")]
        run["rows"] = [r for r in run.get("rows", []) if not r.get("control")]
        runs.append(run)
    return runs


def key_of(row):
    params = row.get("params", {})
    return row.get("problem", "?"), tuple(sorted(params.items()))


def variant(row):
    if row.get("matmul_bound"):
        # The case's bound row: eager's matmuls replayed bare; its x eager
        # is the share of eager's time they take.
        return "oneDNN matmuls alone"
    engine = row.get("engine", "?")
    policy = row.get("policy") or ""
    schedule = row.get("schedule") or ""
    label = engine
    if policy and policy != "as-written":
        label += "/" + policy
    elif policy == "as-written" and engine not in ("eager", "oracle", "reference", "pytorch"):
        label += "/as-written"
    if schedule:
        label += "/" + schedule
    return label


def is_schedule(row):
    return (row.get("policy") or "").startswith("schedule:") or bool(row.get("schedule"))


def failed(row):
    return bool(row.get("error"))


def category_bytes(row, category):
    """Live bytes of `category` at the row's peak; None for files without them."""
    by_category = row.get("peak_bytes_by_category")
    if not by_category or category not in by_category:
        return None
    return by_category[category]


def is_noise(row):
    """Flagged by the bench as physically implausible, or on a case whose
    control was off (harness/bench_controls.h): not a result."""
    return bool(row.get("noise")) or bool(row.get("untrusted"))


def not_a_result(row):
    """What the table prints instead of a ratio: 'noise' or 'untrusted'."""
    return "noise" if row.get("noise") else "untrusted"


def controls_of(run):
    """What the run's controls found, for its line in the report."""
    controls = run.get("controls")
    if not isinstance(controls, dict):
        return "no controls (a run from before they existed: its ratios are unchecked)"
    checks = controls.get("checks", [])
    if controls.get("valid"):
        return (f"controls: all {len(checks)} within {100 * controls.get('allowance', 0):.0f}% "
                f"of 1.00 x eager; {controls.get('trusted')} of {controls.get('rows')} rows "
                "trustworthy")
    off = [f"{c.get('case')} {c.get('variant')}: {c.get('why')}" for c in checks if not c.get("ok")]
    return ("**ratios not valid**: " + (("; ".join(off)) if off else "no control ran") +
            f"; {controls.get('trusted')} of {controls.get('rows')} rows trustworthy")


def ratio_to_eager(row):
    """The row's time / eager's: the paired ratio (eager runs interleaved with
    the row's, the default) when the run has one, else the ratio of the two
    rows' times; None if neither, or if the row is noise."""
    if is_noise(row):
        return None
    for key in ("vs_eager_paired", "vs_eager"):
        if isinstance(row.get(key), (int, float)):
            return row[key]
    return None


def time_vs_eager(row, base):
    vs = ratio_to_eager(row)
    if vs is not None:
        return vs
    return row["real_time_ms"] / base["real_time_ms"]


def shown_times(row):
    """(time ms, eager ms) a table prints beside the row's x eager, so that
    the one over the other is it: a paired row's median pair (pair_time_ms,
    paired_eager_ms: its time and the eager run's next to it); eager's own
    row, its least time twice; otherwise (runs before the bench wrote
    pair_time_ms, unpaired rows) the least time and no eager time."""
    if isinstance(row.get("pair_time_ms"), (int, float)) and isinstance(row.get("paired_eager_ms"), (int, float)):
        return row["pair_time_ms"], row["paired_eager_ms"]
    if row.get("engine") == "eager" and row.get("policy") == "as-written":
        return row["real_time_ms"], row["real_time_ms"]
    return row.get("real_time_ms", float("nan")), None


def short(label):
    return label.replace("recompute/", "").replace("schedule:", "")


def fmt_params(params):
    return ",".join(f"{k}={v}" for k, v in params)


def fmt_ms(ms):
    """A time in ms with two decimals, or three significant digits below 1 ms.

    Two decimals of a microsecond row's 0.05 ms would print a pair of times
    whose quotient is not the row's x eager (0.05 / 0.05 beside 1.21).
    """
    if ms <= 0 or ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.{2 - math.floor(math.log10(ms))}f}"


def table(rows):
    out = ["| problem | size | engine / policy | time ms | eager ms | x eager | spread | peak MiB | residual MiB | "
           "recomputed GFLOP |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        problem, params = key_of(row)
        vs = ratio_to_eager(row)
        if failed(row):
            out.append("| {} | {} | {} | failed: {} | | | | | | |".format(
                problem, fmt_params(params), variant(row), row["error"].replace("|", "/")))
            continue
        spread = row.get("spread")
        time_ms, eager_ms = shown_times(row)
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            problem, fmt_params(params), variant(row), fmt_ms(time_ms),
            "" if eager_ms is None else fmt_ms(eager_ms),
            not_a_result(row) if is_noise(row) else f"{vs:.2f}" if isinstance(vs, (int, float)) else "",
            f"{100 * spread:.1f}%" if isinstance(spread, (int, float)) else "",
            f"{row['peak_bytes'] / MIB:.1f}" if "peak_bytes" in row else "",
            f"{row['residual_bytes'] / MIB:.2f}" if "residual_bytes" in row else "",
            f"{row.get('flops_recomputed', 0) / 1e9:.2f}" if "flops_recomputed" in row else ""))
    return "\n".join(out)


def plots(rows, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "matplotlib is not installed (Debian: python3-matplotlib): plots skipped."
    made = []

    rows = [r for r in rows if not failed(r)]
    # Time plots leave noise rows out (memory is exact whatever the timing).
    timed = [r for r in rows if not is_noise(r)]
    # Peak memory vs depth, scan_stack, one line per variant.
    series = defaultdict(list)
    for row in rows:
        if row.get("problem") != "scan_stack" or "peak_bytes" not in row:
            continue
        params = dict(row.get("params", {}))
        if "L" not in params:
            continue
        series[(variant(row), params.get("d"), params.get("N"))].append(
            (params["L"], row["peak_bytes"] / MIB))
    lines = {k: sorted(v) for k, v in series.items() if len(v) >= 2}
    if lines:
        plt.figure(figsize=(8, 5))
        for (label, d, n), points in sorted(lines.items()):
            plt.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                     label=f"{label} (d={d}, N={n})")
        plt.xscale("log", base=2)
        plt.yscale("log")
        plt.xlabel("depth L")
        plt.ylabel("peak memory (MiB)")
        plt.title("scan_stack: peak memory vs depth")
        plt.grid(True, alpha=0.3)
        plt.legend(fontsize=7)
        plt.tight_layout()
        plt.savefig(os.path.join(out_dir, "memory_vs_depth.png"), dpi=110)
        plt.close()
        made.append(("memory_vs_depth.png", "Peak memory vs depth (scan_stack)"))

    # Trade-off: time overhead vs memory, relative to eager on the same case.
    by_case = cases_by_run(timed)
    points = []
    for (_, *case), case_rows in by_case.items():
        eager = [r for r in case_rows if r.get("engine") == "eager" and "peak_bytes" in r]
        if not eager:
            continue
        base = eager[0]
        for r in case_rows:
            if r is base or "peak_bytes" not in r or r.get("engine") == "pytorch":
                continue
            points.append((case[0], variant(r), r["peak_bytes"] / base["peak_bytes"],
                           time_vs_eager(r, base)))
    if points:
        plt.figure(figsize=(8, 5))
        markers = "os^vD<>ph*"
        for i, problem in enumerate(sorted({p[0] for p in points})):
            mine = [p for p in points if p[0] == problem]
            plt.scatter([p[2] for p in mine], [p[3] for p in mine], marker=markers[i % 10],
                        label=problem)
            for p in mine:
                plt.annotate(p[1].replace("recompute/", ""), (p[2], p[3]), fontsize=6)
        plt.axhline(1.0, color="gray", lw=0.5)
        plt.axvline(1.0, color="gray", lw=0.5)
        plt.xlabel("peak memory / eager's")
        plt.ylabel("time / eager's")
        plt.title("The trade-off: time overhead vs memory, every policy")
        plt.grid(True, alpha=0.3)
        plt.legend(fontsize=7)
        plt.tight_layout()
        plt.savefig(os.path.join(out_dir, "tradeoff.png"), dpi=110)
        plt.close()
        made.append(("tradeoff.png", "Time overhead vs memory saved, every policy"))

    # Eager vs the PyTorch peer.
    peer = [r for r in rows if r.get("engine") == "pytorch"]
    if peer:
        cases = sorted({(r["_run"],) + key_of(r) for r in peer})
        labels, values = [], []
        for case in cases:
            for r in sorted(by_case[case], key=variant):
                if r.get("engine") in ("eager", "pytorch") or variant(r) == "recompute/as-written":
                    labels.append(f"{variant(r)}\n{fmt_params(case[2])}")
                    values.append(r["real_time_ms"])
        plt.figure(figsize=(max(6, len(labels) * 0.9), 5))
        plt.bar(range(len(values)), values)
        plt.xticks(range(len(values)), labels, fontsize=6, rotation=30, ha="right")
        plt.ylabel("time per value_and_grad (ms)")
        plt.title("remat-bench engines vs the PyTorch peer (scan_stack)")
        plt.tight_layout()
        plt.savefig(os.path.join(out_dir, "peer.png"), dpi=110)
        plt.close()
        made.append(("peer.png", "remat-bench vs PyTorch (scan_stack)"))

    frontier = frontier_case(timed)
    if frontier:
        made.append(plot_frontier(plt, frontier, out_dir))
    depth_plot = plot_schedules_vs_depth(plt, rows, out_dir)
    if depth_plot:
        made.append(depth_plot)
    return made, ""


def cases_by_run(rows):
    """Rows by (run, problem, params)."""
    by_case = defaultdict(list)
    for row in rows:
        by_case[(row.get("_run", 0),) + key_of(row)].append(row)
    return by_case


def frontier_case(rows):
    """The case the frontier is drawn on: of the cases with an eager row and
    schedule rows (failed ones aside), the one with the most schedules (the
    deepest on a tie). Returns (eager row, other rows of the case) or None."""
    best = None
    for case, case_rows in cases_by_run(rows).items():
        ok = [r for r in case_rows if not failed(r) and "peak_bytes" in r]
        eager = [r for r in ok if r.get("engine") == "eager"]
        schedules = [r for r in ok if is_schedule(r)]
        if not eager or not schedules:
            continue
        rank = (len({variant(r) for r in schedules}), dict(case[2]).get("L", 0))
        if best is None or rank > best[0]:
            others = [r for r in ok if r is not eager[0] and r.get("engine") != "pytorch"]
            best = (rank, eager[0], others)
    return (best[1], best[2]) if best else None


def pareto(points):
    """The points no other point beats in both time and memory, by time."""
    out = []
    for x, y in sorted(points):
        if not out or y < out[-1][1]:
            out.append((x, y))
    return out


def plot_frontier(plt, frontier, out_dir):
    eager, others = frontier
    problem, params = key_of(eager)
    case = f"{problem} {fmt_params(params)}"
    plt.figure(figsize=(9, 6))
    groups = [
        ("eager (stores everything)", [eager], dict(marker="X", color="black", s=80)),
        ("JAX body checkpointing (policies)",
         [r for r in others if not is_schedule(r)], dict(marker="s", color="tab:orange", s=45)),
        ("schedules", [r for r in others if is_schedule(r)], dict(marker="o", color="tab:blue", s=45)),
    ]
    every = []
    for label, mine, style in groups:
        if not mine:
            continue
        xs = [time_vs_eager(r, eager) for r in mine]
        ys = [r["peak_bytes"] / MIB for r in mine]
        every += list(zip(xs, ys))
        plt.scatter(xs, ys, label=label, zorder=3, **style)
        for i, (r, x, y) in enumerate(zip(mine, xs, ys)):
            name = "eager" if r is eager else short(variant(r))
            plt.annotate(name, (x, y), xytext=(5, 4 if i % 2 == 0 else -9),
                         textcoords="offset points", fontsize=7)
    line = pareto(every)
    plt.step([p[0] for p in line], [p[1] for p in line], where="post", color="gray",
             lw=1, ls="--", label="frontier (nothing both faster and smaller)", zorder=1)
    floors = [category_bytes(r, "inputs") + category_bytes(r, "gradients")
              for r in [eager] + others if category_bytes(r, "inputs") is not None]
    if floors:
        plt.axhline(min(floors) / MIB, color="tab:red", lw=0.8, ls=":",
                    label="arguments + gradients (no schedule goes below)")
    plt.xlabel("time / eager's (same run)")
    plt.ylabel("peak memory (MiB)")
    plt.title(f"Schedules on {case}: peak memory vs time")
    plt.grid(True, alpha=0.3)
    plt.legend(fontsize=7)
    plt.tight_layout()
    plt.savefig(os.path.join(out_dir, "schedules.png"), dpi=110)
    plt.close()
    return ("schedules.png", f"The frontier: every schedule's peak memory vs its time "
            f"overhead ({case})")


def depth_variant(row):
    """The lines of schedules_vs_depth.png: eager, the checkpointed body as
    written, and each schedule."""
    if row.get("engine") == "eager":
        return "eager"
    if row.get("engine") == "recompute" and (is_schedule(row) or row.get("policy") == "as-written"):
        return short(variant(row)) if is_schedule(row) else "as-written (JAX body checkpointing)"
    return None


def plot_schedules_vs_depth(plt, rows, out_dir):
    series = defaultdict(list)
    for row in rows:
        params = dict(row.get("params", {}))
        label = depth_variant(row)
        if row.get("problem") != "scan_stack" or "L" not in params or label is None:
            continue
        # Memory does not vary between runs: depths from several runs (the
        # main job's and --sweep=schedules') make one line; a depth twice
        # is kept once.
        series[(params.get("d"), params.get("N"), label)].append(
            (params["L"], row["peak_bytes"] / MIB, category_bytes(row, "activations")))
    # A schedule's series needs two depths; the plot needs two schedules.
    lines = {}
    for k, v in series.items():
        by_depth = {p[0]: p for p in v}
        if len(by_depth) >= 2:
            lines[k] = sorted(by_depth.values())
    if sum(1 for k in lines if k[2] != "eager" and not k[2].startswith("as-written")) < 2:
        return None
    with_activations = all(p[2] is not None for v in lines.values() for p in v)
    panels = 2 if with_activations else 1
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 5), squeeze=False)
    one_size = len({(k[0], k[1]) for k in lines}) == 1
    colors = plt.get_cmap("tab20").colors
    for i, ((d, n, label), points) in enumerate(sorted(lines.items(), key=lambda kv: kv[0][2])):
        style = dict(marker="o", color=colors[i % len(colors)],
                     label=label if one_size else f"{label} (d={d}, N={n})")
        if label == "eager":
            style.update(color="black", marker="X")
        axes[0][0].plot([p[0] for p in points], [p[1] for p in points], **style)
        if with_activations:
            axes[0][1].plot([p[0] for p in points], [p[2] / MIB for p in points], **style)
    titles = ["peak memory (MiB)", "activations at the peak (MiB)"]
    for i in range(panels):
        ax = axes[0][i]
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("depth L")
        ax.set_ylabel(titles[i])
        ax.grid(True, alpha=0.3)
    size = f" at d={next(iter(lines))[0]}, N={next(iter(lines))[1]}" if one_size else ""
    axes[0][0].set_title(f"scan_stack{size}: peak (arguments and gradients grow with L too)")
    if with_activations:
        axes[0][1].set_title("what the schedule keeps: activations at the peak")
    axes[0][panels - 1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "schedules_vs_depth.png"), dpi=110)
    plt.close(fig)
    return ("schedules_vs_depth.png", "Peak memory vs depth for each schedule (scan_stack)")


def frontier_table(rows):
    """The frontier case's rows relative to eager, by time: what the note
    quotes. Noise rows are left out (their time says nothing)."""
    frontier = frontier_case([r for r in rows if not is_noise(r)])
    if not frontier:
        return []
    eager, others = frontier
    problem, params = key_of(eager)
    out = [f"## Schedules on {problem} {fmt_params(params)} relative to eager", "",
           "The case with the most schedules (the frontier plot's). Peak and time are each "
           "divided by eager's in the same run; activations are those live at the peak.", "",
           "| engine / policy | time ms | eager ms | x eager | peak MiB | peak / eager's | "
           "activations MiB | recomputed GFLOP |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in [eager] + sorted(others, key=lambda r: time_vs_eager(r, eager)):
        act = category_bytes(r, "activations")
        time_ms, eager_ms = shown_times(r)
        out.append("| {} | {:.1f} | {} | {:.2f} | {:.1f} | {:.2f} | {} | {:.2f} |".format(
            variant(r), time_ms, "" if eager_ms is None else f"{eager_ms:.1f}",
            time_vs_eager(r, eager), r["peak_bytes"] / MIB,
            r["peak_bytes"] / eager["peak_bytes"], "" if act is None else f"{act / MIB:.1f}",
            r.get("flops_recomputed", 0) / 1e9))
    return out + [""]


def peer_table(rows, controls=()):
    """The field's engines (bench --peer) beside remat's, case by case: each
    as written (checkpointed) and without checkpointing, x eager's row of the
    same run; and the case's A/A control (`controls`: a second eager) by the
    same measure, the least time over eager's, which shows how far apart
    that measure puts two identical engines in the run."""
    peers = [r for r in rows if r.get("peer")]
    if not peers:
        return []
    mine = {}
    for r in rows:
        if not r.get("peer") and not failed(r) and r.get("engine") in ("eager", "recompute"):
            mine[(r["_run"],) + key_of(r) + (r["engine"], r.get("policy"))] = r
    twins = {(r["_run"],) + key_of(r): r for r in controls
             if not failed(r) and r.get("engine") == "eager" and r.get("real_time_ms")}
    twin_ratios = []
    out = ["## The field's engines, in the same run", "",
           "Rows of `//harness:bench -- --peer`: JAX (`jax.jit(jax.value_and_grad(...))`, regions as "
           "`jax.checkpoint`), PyTorch (eager autograd, regions as `torch.utils.checkpoint`) and "
           "torch.compile (inductor) run the same program on eager's inputs (tools/peer_time.py: "
           "the least of 5 runs after 2 warm-ups, compiling not timed); `x eager` is over eager's "
           "row of the same run. `checkpointed` is the problem as written, `plain` the problem "
           "under everything_saveable (no recomputation). `remat eager A/A` is the case's control, "
           "a second eager instance, by the same measure (its least time over eager's): how far "
           "apart that measure puts two identical engines in this run.", "",
           "| problem | size | engine | plain ms | plain x eager | checkpointed ms | checkpointed x eager |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    cases = []
    for r in peers:
        case = (r["_run"],) + key_of(r)
        if case not in cases:
            cases.append(case)

    def cell(r):
        if r is None:
            return "", ""
        if failed(r):
            return "error: " + r["error"].replace("|", "/")[:80], ""
        ratio = r.get("vs_eager")
        return f"{r['real_time_ms']:.1f}", "" if ratio is None else f"{ratio:.2f}"

    for case in cases:
        run, problem, params = case
        eager = mine.get(case + ("eager", "as-written"))
        recompute = mine.get(case + ("recompute", "as-written"))
        if eager:
            # Every ratio of this table over eager's row (the peers' cannot
            # be paired), recompute's too: time / eager's time, as printed.
            out.append("| {} | {} | remat eager / recompute | {:.1f} | 1.00 | {} | {} |".format(
                problem, fmt_params(params), eager["real_time_ms"],
                f"{recompute['real_time_ms']:.1f}" if recompute else "",
                f"{recompute['real_time_ms'] / eager['real_time_ms']:.2f}" if recompute else ""))
            twin = twins.get(case)
            if twin:
                ratio = twin["real_time_ms"] / eager["real_time_ms"]
                twin_ratios.append(ratio)
                out.append(f"| {problem} | {fmt_params(params)} | remat eager A/A | "
                           f"{twin['real_time_ms']:.1f} | {ratio:.2f} |  |  |")
        for engine in ("jax", "torch", "torch-compile"):
            got = {r.get("policy"): r for r in peers
                   if (r["_run"],) + key_of(r) == case and r.get("engine") == engine}
            if not got:
                continue
            plain, checkpointed = cell(got.get("everything_saveable")), cell(got.get("as-written"))
            out.append(f"| {problem} | {fmt_params(params)} | {engine} | {plain[0]} | {plain[1]} | "
                       f"{checkpointed[0]} | {checkpointed[1]} |")
    out.append("")
    if twin_ratios:
        out += [f"The A/A rows' least-time ratios lie between {min(twin_ratios):.3f} and "
                f"{max(twin_ratios):.3f}: two engines whose ratios here differ by less than "
                f"{100 * max(abs(r - 1) for r in twin_ratios):.1f}% are not told apart by this "
                "measure (the bench's own rows are judged by their paired ratios and controls, "
                "not by it).", ""]
    else:
        out += ["No A/A control ran beside these rows (a run from before they existed): how far "
                "apart this measure puts two identical engines is not known.", ""]
    return out


def scale_table(rows):
    """Rows run at scale (marked big: one run each), with the peak by category."""
    big = [r for r in rows if r.get("big")]
    if not big:
        return []
    gib = MIB * 1024
    out = ["## At scale", "",
           "Rows of `//harness:bench -- --sweep=scale`: each run once (no warm-up). The peak "
           "is split by what was live at that moment: the arguments (inputs), the gradients "
           "(the weights' gradient and cotangents), the activations (what the schedule keeps "
           "and recomputes) and oneDNN's scratchpad. A row whose predicted peak exceeds "
           "--max-memory is refused before it allocates.", "",
           "| problem | size | engine / policy | time s | peak GiB | activations MiB | "
           "inputs GiB | gradients GiB | recomputed GFLOP |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in big:
        problem, params = key_of(r)
        if failed(r):
            out.append("| {} | {} | {} | refused: {} | | | | | |".format(
                problem, fmt_params(params), variant(r), r["error"].replace("|", "/")))
            continue
        cat = {c: category_bytes(r, c) for c in ("activations", "inputs", "gradients")}
        out.append("| {} | {} | {} | {:.1f} | {:.2f} | {} | {} | {} | {:.0f} |".format(
            problem, fmt_params(params), variant(r), r["real_time_ms"] / 1e3,
            r["peak_bytes"] / gib,
            "" if cat["activations"] is None else f"{cat['activations'] / MIB:.0f}",
            "" if cat["inputs"] is None else f"{cat['inputs'] / gib:.2f}",
            "" if cat["gradients"] is None else f"{cat['gradients'] / gib:.2f}",
            r.get("flops_recomputed", 0) / 1e9))
    return out + [""]


def platform_of(run):
    """The run's platform in one line: CPU, cores, oneDNN, its ISA and cap,
    the matmul implementations (the reference shape's, and those its rows
    executed), and the lanes of our own elementwise passes (runs from before
    they were recorded have none)."""
    machine = run.get("machine", {})
    isa = machine.get("onednn_isa") or "?"
    cap = machine.get("isa_cap")
    impls = sorted({impl for row in run.get("rows", []) for impl in row.get("matmul_impls", [])})
    text = f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
    text += f"{machine.get('onednn', '?')}, ISA {isa}"
    text += f" (cap {cap})" if cap else " (no cap)"
    if machine.get("matmul_impl"):
        text += f", matmul {machine['matmul_impl']}"
    if machine.get("lanes"):
        text += f", elementwise lanes {machine['lanes']}"
    if impls:
        text += f"; rows' matmuls ran on {', '.join(impls)}"
    return text


def source_of(run):
    """The commit the run was built from, as the bench records it ("source"):
    where to check out to run its command again."""
    source = run.get("source")
    if source is None:
        return "source not recorded (a run from before the bench recorded its commit)"
    if not source.get("commit"):
        return f"source not recorded ({source.get('error', 'no commit')})"
    state = "tracked files modified" if source.get("modified") else "tree as committed"
    return f"at commit {source['commit'][:12]} ({state})"


def platform_warnings(runs):
    """One line per way the runs' platforms differ in CPU, or in oneDNN's
    ISA among runs without a cap (a capped run is an ISA family of its own,
    on purpose; runs recorded before the ISA was show it as unknown)."""
    out = []
    for key, what in (("cpu", "CPU"), ("onednn_isa", "ISA")):
        seen = defaultdict(list)
        for run in runs:
            if key == "onednn_isa" and (run.get("machine", {}).get("isa_cap") or "").strip():
                continue
            seen[run.get("machine", {}).get(key) or "unknown"].append(run["_path"])
        if len(seen) > 1:
            parts = "; ".join(f"{value} in {', '.join(f'`{p}`' for p in paths)}"
                              for value, paths in sorted(seen.items()))
            out.append(f"**Warning: the runs merged here differ in {what}** ({parts}): times "
                       "from different platforms are not comparable, and only ratios within "
                       "one run are.")
    return out


def load_compile_budget(path):
    """The rows of a tools/torch_compile_budget.py TSV, and its header comment."""
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    comment = [l[1:].strip() for l in lines if l.startswith("#")]
    body = [l.split("\t") for l in lines if not l.startswith("#")]
    if not body:
        raise SystemExit("report: %s: no header line" % path)
    header, rows = body[0], []
    for fields in body[1:]:
        row = dict(zip(header, fields))
        for k, v in row.items():
            if k.startswith(("torch_", "remat_")) and not k.startswith(("remat_plan",)):
                row[k] = int(v)
        rows.append(row)
    return rows, comment[0] if comment else ""


def compile_budget_section(path, out_dir):
    """The torch.compile-vs-remat section: one table per problem, the largest
    gaps, and compile_budget.png (when matplotlib is there)."""
    rows, comment = load_compile_budget(path)
    mib = lambda b: "%.2f" % (b / MIB)  # noqa: E731
    gflop = lambda f: "%.3f" % (f / 1e9)  # noqa: E731
    md = ["## torch.compile's activation_memory_budget against remat's memory_budget:B", "",
          "Generated from `%s` (`.venv/bin/python %s > %s`). Both plan the same function "
          "(the problem at its bench size, regions inlined: a model with no checkpoint calls) "
          "under the same fraction B (0 recomputes what can be, 1 saves what no checkpointing "
          "would): PyTorch's min-cut partitioner with its knapsack, remat's engines/budget "
          "planner. Saved bytes exclude the inputs; recomputed FLOPs are matmul and "
          "convolution FLOPs (what FlopCounterMode counts) on both sides. The two sides' "
          "B = 1 differ because their op rules differ (PyTorch's relu keeps its output, "
          "remat's and JAX's its input; PyTorch's dropout keeps its mask, remat's its seed), "
          "so the last columns give remat's plan within the bytes torch.compile gave "
          "activations (its saved bytes less the masks): the two planners at one memory "
          "size." % (path, comment.split(";", 1)[1].strip() if ";" in comment else "tools/torch_compile_budget.py",
                     path), ""]
    by_problem = defaultdict(list)
    for r in rows:
        by_problem[(r["problem"], r["size"])].append(r)
    gaps = []
    for (problem, size), mine in by_problem.items():
        md += ["### %s (%s)" % (problem, size), "",
               "| B | torch saved MiB | torch recomputed GFLOP | remat saved MiB | remat recomputed GFLOP "
               "| remat plan | at torch's activation bytes: remat saved MiB | remat recomputed GFLOP | verdict |",
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in sorted(mine, key=lambda r: float(r["budget"])):
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["budget"], mib(r["torch_saved_bytes"]), gflop(r["torch_recomputed_flops"]),
                mib(r["remat_saved_bytes"]), gflop(r["remat_recomputed_flops"]), r["remat_plan"],
                mib(r["remat_saved_bytes_at_torch_bytes"]), gflop(r["remat_recomputed_flops_at_torch_bytes"]),
                r["verdict_at_torch_bytes"]))
            gaps.append((r["torch_recomputed_flops"] - r["remat_recomputed_flops_at_torch_bytes"], problem, r["budget"]))
        md.append("")
    better = [g for g in gaps if g[0] > 0]
    worse = [g for g in gaps if g[0] < 0]
    equal = len(gaps) - len(better) - len(worse)
    summary = ("At torch.compile's activation bytes, remat's plan recomputes the same FLOPs in %d of %d "
               "cases" % (equal, len(gaps)))
    if better:
        g = max(better)
        summary += "; fewer in %d, at most %s GFLOP fewer (%s, B = %s)" % (len(better), gflop(g[0]), g[1], g[2])
    if worse:
        g = min(worse)
        summary += "; more in %d, at most %s GFLOP more (%s, B = %s: a plan not proven optimal, or a "                   "byte count between the two)" % (len(worse), gflop(-g[0]), g[1], g[2])
    md += [summary + ".", ""]
    less = [(r["remat_saved_bytes"] - r["torch_saved_bytes"], r["problem"], r["budget"]) for r in rows
            if r["torch_saved_bytes"] < r["remat_saved_bytes"]]
    more_flops = [r for r in rows if r["torch_recomputed_flops"] > r["remat_recomputed_flops"]]
    if less:
        g = max(less)
        why = (" the plans differ with the op rules, not the planners (which agree at equal bytes):"
               if not better and not worse else "")
        md += ["At the same fraction B%s torch.compile saves fewer bytes than remat in %d of %d cases (at most "
               "%s MiB fewer: %s, B = %s) and recomputes more FLOPs in %d." % (
                   why, len(less), len(rows), mib(g[0]), g[1], g[2], len(more_flops)), ""]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return md + ["matplotlib is not installed: compile_budget.png skipped.", ""]
    keys = list(by_problem)
    cols = 3
    fig, axes = plt.subplots((len(keys) + cols - 1) // cols, cols, figsize=(13, 4 * ((len(keys) + cols - 1) // cols)),
                             squeeze=False)
    for ax, key in zip(axes.flat, keys):
        mine = sorted(by_problem[key], key=lambda r: float(r["budget"]))
        ax.plot([r["torch_saved_bytes"] / MIB for r in mine], [r["torch_recomputed_flops"] / 1e9 for r in mine],
                "o-", label="torch.compile at B")
        ax.plot([r["remat_saved_bytes"] / MIB for r in mine], [r["remat_recomputed_flops"] / 1e9 for r in mine],
                "s--", label="remat memory_budget:B")
        ax.plot([r["remat_saved_bytes_at_torch_bytes"] / MIB for r in mine],
                [r["remat_recomputed_flops_at_torch_bytes"] / 1e9 for r in mine],
                "x", markersize=9, label="remat at torch's activation bytes")
        for r in mine:
            ax.annotate(r["budget"], (r["torch_saved_bytes"] / MIB, r["torch_recomputed_flops"] / 1e9),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_title("%s %s" % key, fontsize=9)
        ax.set_xlabel("saved MiB")
        ax.set_ylabel("recomputed GFLOP (matmul, conv)")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "compile_budget.png"), dpi=100)
    plt.close(fig)
    return md + ["![torch.compile vs remat](compile_budget.png)", ""]


def run_kind(run):
    """'peer' for a run with the field's engines (its rows go to the peer
    table), the sweep's name for a --sweep run, else 'default'."""
    command = run.get("command", "")
    if any(r.get("peer") for r in run.get("rows", [])) or run.get("peer"):
        return "peer"
    for word in command.split():
        if word.startswith("--sweep="):
            return word[len("--sweep="):]
    return "default"


def isa_family(run):
    """'AVX-512', 'AVX2 cap' ...: what a reader compares runs by."""
    machine = run.get("machine", {})
    cap = (machine.get("isa_cap") or "").strip()
    if cap:
        return f"{cap.upper()} cap"
    isa = (machine.get("onednn_isa") or "").lower()
    for prefix, name in (("avx512", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse41", "SSE4.1")):
        if isa.startswith(prefix):
            return name
    return isa or "unknown ISA"


def run_title(run):
    kind = run_kind(run)
    what = "The default run" if kind == "default" else f"--sweep={kind}"
    return f"{what}, {isa_family(run)} (`{run['_path']}`)"


def agreement_section(runs):
    """For each ISA family with two default runs or more: how far each run
    agrees with the one before it, row by row (tools/ratio_agreement.py's
    --matrix comparison: the rows that ran oneDNN matmuls)."""
    out = []
    by_family = defaultdict(list)
    for run in runs:
        if run_kind(run) == "default":
            by_family[isa_family(run)].append(run)
    for family, same in by_family.items():
        for a, b in zip(same, same[1:]):
            compared, agree, noise, diffs = agreement(a["rows"], b["rows"], 0.03, matrix=True)
            every, every_agree, _, _ = agreement(a["rows"], b["rows"], 0.03, matrix=True,
                                                 include_noise=True)
            out += [f"## Two default runs back to back, {family}", "",
                    f"`{a['_path']}` and `{b['_path']}` (the second only here), row by row: "
                    f"{agree} of {compared} rows with matmuls that neither run flagged have "
                    f"x eager within 3% of each other ({noise} flagged in either run left out; "
                    f"with them, {every_agree} of {every}). The rows that differ most:", "",
                    "| row | x eager, first run | x eager, second run |",
                    "| --- | ---: | ---: |"]
            for _, name, va, vb in diffs[:8]:
                out.append(f"| {name.replace('BM_ValueAndGrad/', '')} | {va:.3f} | {vb:.3f} |")
            out.append("")
    return out


def command_line(args):
    """The command that writes this report again (REPORT.md's first line)."""
    words = ["/usr/bin/python3", "tools/report.py"] + list(args.inputs)
    if args.compile_budget:
        words += ["--compile-budget", args.compile_budget]
    return " ".join(words)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inputs", nargs="*", default=["results/latest.json"])
    parser.add_argument("--out", default="results")
    parser.add_argument("--compile-budget", metavar="TSV",
                        help="a tools/torch_compile_budget.py run: its section and compile_budget.png")
    parser.add_argument("--section-only", action="store_true",
                        help="print one section alone (to stdout): with --compile-budget that one (and write "
                             "its plot), else the inputs' peer table (bench --peer)")
    args = parser.parse_args()
    if args.compile_budget and args.section_only:
        os.makedirs(args.out, exist_ok=True)
        print("\n".join(compile_budget_section(args.compile_budget, args.out)))
        return 0
    missing = [p for p in args.inputs if not os.path.exists(p)]
    if missing:
        print(f"report: no such results file: {', '.join(missing)} "
              "(run tools/bazel run //harness:bench first)", file=sys.stderr)
        return 2
    runs = load(args.inputs)
    every_row = [row for run in runs for row in run.get("rows", [])]
    every_control = [row for run in runs for row in run.get("_controls", [])]
    if args.section_only:
        print("\n".join(peer_table(every_row, every_control)))
        return 0
    # The field's engines' rows have their own table (peer_table), and so do
    # the rows of a --peer run.
    rows = [row for row in every_row if not row.get("peer")]
    # A family's later default runs are evidence of agreement only.
    tabled, families = [], set()
    for i, run in enumerate(runs):
        kind = run_kind(run)
        if kind == "peer" or (kind == "default" and isa_family(run) in families):
            continue
        if kind == "default":
            families.add(isa_family(run))
        tabled.append(i)
    # Plots and the frontier compare rows across runs: of one ISA family.
    family = isa_family(runs[tabled[0]]) if tabled else None
    same_family = [r for r in rows if r["_run"] in tabled and isa_family(runs[r["_run"]]) == family]
    os.makedirs(args.out, exist_ok=True)
    made, note = plots(same_family, args.out)

    md = ["# remat-bench report", "",
          "Generated by `" + command_line(args) + "` from these runs (never edited by hand; "
          "tools/report_test.py writes it again and compares):", ""]
    for run in runs:
        md.append(f"- `{run['_path']}`: `{run.get('command', '?')}` on {run.get('date', '?')}, "
                  f"{source_of(run)}; platform: {platform_of(run)}; {controls_of(run)}")
    warnings = platform_warnings(runs)
    if warnings:
        md += [""] + warnings
    md += ["", "`x eager` is the median over the row's quiet pairs (no neighbour took a CPU "
           "from either run) of the row's wall time of one value_and_grad (forward and "
           "backward) over that of an eager run interleaved with it on the same problem and "
           "size (or the ratio to eager's row, in unpaired runs), measured in the same run; "
           "`time ms` and `eager ms` are that median pair's two times, so that the one over "
           "the other is `x eager` (runs that predate `pair_time_ms` in their JSON give the "
           "row's least quiet time and no eager time); eager's own row gives its least quiet "
           "time. `spread` is half that median's 95% interval. `noise`: the bench found the row's "
           "numbers physically implausible (too few quiet samples, below the FLOP model's "
           "floor or above the matmul bound, windows that disagree) or its x eager known "
           "only within more than +-3% (runs from before that check did not flag it); "
           "rerun it. `untrusted`: the case's control "
           "(a second eager instance, or recompute/everything_saveable, eager's plan, on "
           "the matmul cases) was more than 2% from 1.00 x eager, so no ratio of that case "
           "is a measurement. "
           "Peak memory is the MemoryTracker's high-water mark (arguments, "
           "activations, gradients, oneDNN scratchpad).", ""]
    if made:
        md += ["Plots (below): " + "; ".join(f"`{file}`: {title}" for file, title in made) + ".",
               ""]
    for index in tabled:
        run = runs[index]
        md += [f"## {run_title(run)}", "", f"`{run.get('command', '?')}` on {run.get('date', '?')}: "
               f"{controls_of(run)}.", ""]
        mine = [r for r in rows if r["_run"] == index]
        for problem in sorted({r.get("problem", "?") for r in mine}):
            md += [f"### {problem}", "", table([r for r in mine if r.get("problem") == problem]), ""]
    md += agreement_section(runs)
    md += frontier_table(same_family)
    md += peer_table(every_row, every_control)
    md += scale_table(same_family)
    if args.compile_budget:
        md += compile_budget_section(args.compile_budget, args.out)
    if made:
        md += ["## Plots", ""]
        for file, title in made:
            md += [f"### {title}", "", f"![{title}]({file})", ""]
    elif note:
        md += [note, ""]
    with open(os.path.join(args.out, "REPORT.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"report: wrote {os.path.join(args.out, 'REPORT.md')} and {len(made)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
