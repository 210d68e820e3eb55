"""tools/report.py's plots (matplotlib, from Debian's python3-matplotlib;
without it the report says they were skipped), and the torch.compile
section with its own plot (a tools/torch_compile_budget.py TSV)."""

import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_runs import (  # noqa: E402
    MIB, cases_by_run, category_bytes, failed, fmt_params, frontier_case, is_noise, is_schedule, key_of,
    short, time_vs_eager, variant)


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

