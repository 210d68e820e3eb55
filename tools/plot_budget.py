#!/usr/bin/env python3
"""The memory_budget:B curve, from a //harness:budget_curve listing.

    tools/bazel run //harness:budget_curve > results/budget_curve-DATE.tsv
    /usr/bin/python3 tools/plot_budget.py results/budget_curve-DATE.tsv --out results

Writes results/budget_curve.png: for every problem, recomputed FLOPs (as a
multiple of one forward pass) against the residual bytes kept (as a share of
what everything_saveable keeps), memory_budget:B for B = 0, 0.1, ..., 1 as
a line, JAX's policies and the schedules as points; and prints the markdown
table of one problem (--table, default transformer_stack) REPORT.md quotes.
"""
import argparse
import csv
import os
import sys


def parse(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def share(rows):
    """Each row's residual bytes over everything_saveable's on its problem."""
    full = {r["problem"]: int(r["residual_bytes"]) for r in rows
            if r["engine"] == "recompute" and r["policy"] == "everything_saveable"}
    for r in rows:
        base = full.get(r["problem"]) or 1
        r["kept"] = int(r["residual_bytes"]) / base
        r["x_fwd"] = int(r["flops_recomputed"]) / max(1, int(r["flops_forward"]))
    return rows


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    problems = []
    for r in rows:
        if r["problem"] not in problems:
            problems.append(r["problem"])
    cols = 4
    nrows = (len(problems) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows), squeeze=False)
    markers = {"nothing_saveable": "v", "dots_saveable": "s",
               "dots_with_no_batch_dims_saveable": "D", "everything_saveable": "^",
               "as-written": "o"}
    for i, p in enumerate(problems):
        ax = axes[i // cols][i % cols]
        mine = [r for r in rows if r["problem"] == p and r["policy"].startswith("memory_budget:")]
        ax.plot([r["kept"] for r in mine], [r["x_fwd"] for r in mine], "-o", color="C0",
                markersize=3, label="memory_budget:B", zorder=3)
        for r in rows:
            if r["problem"] != p or r["engine"] != "recompute" or r["policy"].startswith("memory_budget:"):
                continue
            pol = r["policy"]
            if pol.startswith("schedule:"):
                ax.plot(r["kept"], r["x_fwd"], "x", color="C3", markersize=7)
                ax.annotate(pol[9:], (r["kept"], r["x_fwd"]), fontsize=6, color="C3",
                            xytext=(3, 3), textcoords="offset points")
            else:
                ax.plot(r["kept"], r["x_fwd"], markers.get(pol, "o"), color="C1", markersize=6,
                        fillstyle="none", label=pol)
        size = mine[0]["size"] if mine else ""
        ax.set_title(f"{p} {size if size != '-' else ''}", fontsize=8)
        ax.set_xlabel("residual bytes / everything_saveable's", fontsize=7)
        ax.set_ylabel("recomputed FLOPs / forward", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for j in range(len(problems), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for a in axes.flat:
        h, l = a.get_legend_handles_labels()
        for hh, ll in zip(h, l):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle("memory_budget:B (line, B = 0..1) vs JAX's policies (hollow) and schedules (x): "
                 "dry runs, exact bytes and FLOPs", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    path = os.path.join(out, "budget_curve.png")
    fig.savefig(path, dpi=110)
    return path


def table(rows, problem):
    lines = ["| policy | residual MiB | kept / everything_saveable | planned peak MiB | "
             "recomputed GFLOP | recomputed / forward |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r["problem"] != problem:
            continue
        name = r["engine"] if r["engine"] == "eager" else "recompute/" + r["policy"]
        lines.append(f"| {name} | {int(r['residual_bytes']) / 2**20:.2f} | {r['kept']:.2f} | "
                     f"{int(r['peak_bytes']) / 2**20:.2f} | {int(r['flops_recomputed']) / 1e9:.4f} | "
                     f"{r['x_fwd']:.3f} |")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("listing")
    ap.add_argument("--out", default="results")
    ap.add_argument("--table", default="transformer_stack")
    args = ap.parse_args(argv)
    rows = share(parse(args.listing))
    path = plot(rows, args.out)
    print(f"wrote {path}", file=sys.stderr)
    print(table(rows, args.table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
