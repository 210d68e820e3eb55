#!/usr/bin/python3
"""Turns remat-bench results JSON into results/REPORT.md with tables and plots.

    tools/report.py [results/latest.json ...] [--out results]

Each input is a file //harness:bench wrote (rows of problem x engine x
policy/schedule x size, with the command and the machine). Rows of several
files are merged; the report names every file and the command behind it.

Plots (PNG, matplotlib from Debian's python3-matplotlib; without it the
report has its tables and says the plots were skipped):
  memory_vs_depth.png   peak memory vs depth (scan_stack), per engine and policy
  tradeoff.png          time overhead vs memory saved, per policy, per problem
  peer.png              eager and recompute vs the PyTorch peer, scan_stack
  schedules.png         every schedule's peak vs its time overhead (the frontier)
"""

import argparse
import json
import os
import sys
from collections import defaultdict

MIB = 1024.0 * 1024.0


def load(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        run["_path"] = path
        runs.append(run)
    return runs


def key_of(row):
    params = row.get("params", {})
    return row.get("problem", "?"), tuple(sorted(params.items()))


def variant(row):
    engine = row.get("engine", "?")
    policy = row.get("policy") or ""
    schedule = row.get("schedule") or ""
    label = engine
    if policy and policy != "as-written":
        label += "/" + policy
    elif policy == "as-written" and engine not in ("eager", "reference", "pytorch"):
        label += "/as-written"
    if schedule:
        label += "/" + schedule
    return label


def is_schedule(row):
    return (row.get("policy") or "").startswith("schedule:") or bool(row.get("schedule"))


def fmt_params(params):
    return ",".join(f"{k}={v}" for k, v in params)


def table(rows):
    out = ["| problem | size | engine / policy | time ms | x eager | peak MiB | residual MiB | recomputed GFLOP |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        problem, params = key_of(row)
        vs = row.get("vs_eager")
        out.append("| {} | {} | {} | {:.2f} | {} | {} | {} | {} |".format(
            problem, fmt_params(params), variant(row), row.get("real_time_ms", float("nan")),
            f"{vs:.2f}" if isinstance(vs, (int, float)) else "",
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
    by_case = defaultdict(list)
    for row in rows:
        by_case[key_of(row)].append(row)
    points = []
    for case, case_rows in by_case.items():
        eager = [r for r in case_rows if r.get("engine") == "eager" and "peak_bytes" in r]
        if not eager:
            continue
        base = eager[0]
        for r in case_rows:
            if r is base or "peak_bytes" not in r or r.get("engine") == "pytorch":
                continue
            points.append((case[0], variant(r), r["peak_bytes"] / base["peak_bytes"],
                           r["real_time_ms"] / base["real_time_ms"]))
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
        cases = sorted({key_of(r) for r in peer})
        labels, values = [], []
        for case in cases:
            for r in sorted(by_case[case], key=variant):
                if r.get("engine") in ("eager", "pytorch") or variant(r) == "recompute/as-written":
                    labels.append(f"{variant(r)}\n{fmt_params(case[1])}")
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

    # Schedules: the memory/time frontier on each scheduled case.
    scheduled = [r for r in rows if is_schedule(r)]
    if scheduled:
        plt.figure(figsize=(8, 5))
        for case in sorted({key_of(r) for r in scheduled}):
            case_rows = by_case[case]
            eager = [r for r in case_rows if r.get("engine") == "eager"]
            mine = [r for r in case_rows if is_schedule(r) or r.get("engine") == "recompute"]
            if not eager:
                continue
            base = eager[0]
            xs = [r["real_time_ms"] / base["real_time_ms"] for r in mine]
            ys = [r["peak_bytes"] / MIB for r in mine]
            plt.scatter(xs, ys, label=fmt_params(case[1]))
            for r, x, y in zip(mine, xs, ys):
                plt.annotate(variant(r).replace("recompute/", ""), (x, y), fontsize=6)
            plt.scatter([1.0], [base["peak_bytes"] / MIB], marker="x", color="black")
            plt.annotate("eager", (1.0, base["peak_bytes"] / MIB), fontsize=7)
        plt.yscale("log")
        plt.xlabel("time / eager's")
        plt.ylabel("peak memory (MiB)")
        plt.title("Schedules: peak memory vs time overhead")
        plt.grid(True, alpha=0.3)
        plt.legend(fontsize=7)
        plt.tight_layout()
        plt.savefig(os.path.join(out_dir, "schedules.png"), dpi=110)
        plt.close()
        made.append(("schedules.png", "Every schedule's peak memory vs its time overhead"))
    return made, ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inputs", nargs="*", default=["results/latest.json"])
    parser.add_argument("--out", default="results")
    args = parser.parse_args()
    missing = [p for p in args.inputs if not os.path.exists(p)]
    if missing:
        print(f"report: no such results file: {', '.join(missing)} "
              "(run tools/bazel run //harness:bench first)", file=sys.stderr)
        return 2
    runs = load(args.inputs)
    rows = [row for run in runs for row in run.get("rows", [])]
    os.makedirs(args.out, exist_ok=True)
    made, note = plots(rows, args.out)

    md = ["# remat-bench report", "",
          "Generated by `tools/report.py " + " ".join(args.inputs) + "` from these runs:", ""]
    for run in runs:
        machine = run.get("machine", {})
        md.append(f"- `{run['_path']}`: `{run.get('command', '?')}` on {run.get('date', '?')}, "
                  f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
                  f"{machine.get('onednn', '')}")
    md += ["", "Times are the mean wall time of one value_and_grad (forward and backward); "
           "`x eager` is the ratio to eager on the same problem and size, measured in the "
           "same run. Peak memory is the MemoryTracker's high-water mark (arguments, "
           "activations, gradients, oneDNN scratchpad).", ""]
    problems = sorted({r.get("problem", "?") for r in rows})
    for problem in problems:
        mine = [r for r in rows if r.get("problem") == problem]
        md += [f"## {problem}", "", table(mine), ""]
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
