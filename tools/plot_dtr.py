#!/usr/bin/env python3
"""dtr against budget:B, from a //harness:dtr_sweep listing.

    tools/bazel run //harness:dtr_sweep -- --depths=16,64,256 > results/dtr_sweep-DATE.txt
    /usr/bin/python3 tools/plot_dtr.py results/dtr_sweep-DATE.txt --out results

Writes results/dtr_vs_budget.png (recomputed FLOPs, as a multiple of one
forward pass, against the memory cap as a share of eager's peak: dtr at the
cap, and budget:B for the largest B whose planned peak fits under the same
cap) and prints the markdown table REPORT.md quotes.
"""
import argparse
import os
import re
import sys

ROW = re.compile(r"^(\w+)\s+(\d+)\s+(\d+)%\s+(\d+) \|\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+) \|.*\| (.*)$")


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            m = ROW.match(line.rstrip("\n"))
            if not m:
                continue
            same_peak = m.group(9).split()
            rows.append({
                "problem": m.group(1), "L": int(m.group(2)), "cap_pct": int(m.group(3)),
                "dtr_x_fwd": float(m.group(8)),
                "budget_x_fwd": None if "fits" in m.group(9) else float(same_peak[2]),
            })
    if not rows:
        sys.exit(f"plot_dtr: no sweep rows in {path}")
    return rows


def table(rows):
    out = ["| problem | L | cap (% of eager's peak) | dtr: recomputed x forward | "
           "budget:B at the same peak |", "| --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        b = "no budget fits" if r["budget_x_fwd"] is None else f"{r['budget_x_fwd']:.2f}"
        out.append(f"| {r['problem']} | {r['L']} | {r['cap_pct']}% | {r['dtr_x_fwd']:.2f} | {b} |")
    return "\n".join(out)


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    problems = sorted({r["problem"] for r in rows})
    fig, axes = plt.subplots(1, len(problems), figsize=(6 * len(problems), 4.5), squeeze=False)
    for ax, problem in zip(axes[0], problems):
        for depth in sorted({r["L"] for r in rows if r["problem"] == problem}):
            rs = [r for r in rows if r["problem"] == problem and r["L"] == depth]
            line, = ax.plot([r["cap_pct"] for r in rs], [r["dtr_x_fwd"] for r in rs], "o-",
                            label=f"dtr L={depth}")
            fit = [r for r in rs if r["budget_x_fwd"] is not None]
            ax.plot([r["cap_pct"] for r in fit], [r["budget_x_fwd"] for r in fit], "s--",
                    color=line.get_color(), alpha=0.6, label=f"budget:B L={depth}")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_xlabel("memory cap, % of eager's peak")
        ax.set_ylabel("recomputed FLOPs / one forward pass")
        ax.set_title(problem)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, "dtr_vs_budget.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep")
    parser.add_argument("--out", default="results")
    args = parser.parse_args()
    rows = parse(args.sweep)
    print(table(rows))
    print(plot(rows, args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
