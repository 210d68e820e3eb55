#!/usr/bin/python3
"""Turns remat-bench results JSON into results/REPORT.md and REPORT-full.md,
with tables and plots.

    /usr/bin/python3 tools/report.py [results/runs/latest.json ...] [--compile-budget TSV] [--out results]

Each input is a file //harness:bench wrote (rows of problem x engine x
policy/schedule x size, with the command and the machine). The report is
wholly generated: its first lines give the command that wrote it (so that
tools/report_committed_test.py can write it again and find it unchanged),
then every file, the command behind it and the platform it ran on (CPU,
oneDNN's ISA and cap, and the matmul implementations its rows executed).
REPORT.md holds, per ISA family, one line per case of the family's latest
valid default run (a default run on AVX-512 and one under
ONEDNN_MAX_CPU_ISA=AVX2 side by side, since times of two runs are not
comparable), and the plots; REPORT-full.md, written by the same command,
holds every table: each tabled run's (those families' runs and every
--sweep run), the agreement of a family's default runs, and the sections
below. The report warns when uncapped runs differ in CPU or ISA. Rows the
bench flagged as noise (physically implausible timings) show "noise"
instead of a ratio and stay out of the time plots; the plots use the
tabled runs of the first tabled run's ISA family.

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
REPORT.md has, after the default runs, each --sweep=models run's models
beside the field's engines (tools/report_models.py).
Sections of REPORT-full.md: a table per problem of each tabled run; the
frontier case's schedules relative to eager;
rows run at scale (//harness:bench --sweep=scale: one run each, peak by
category, refusals past --max-memory); with --compile-budget TSV,
torch.compile's activation_memory_budget against remat's memory_budget:B
(tools/torch_compile_budget.py's run: a table per problem, the gaps, and
compile_budget.png; --section-only prints that section alone).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The modules, by concern: report_runs.py (loading runs, naming rows, what a
# run is), report_tables.py, report_plots.py (and the torch.compile
# section). Their names are this module's too (the tests call them here).
from report_runs import *  # noqa: E402,F401,F403
from report_tables import *  # noqa: E402,F401,F403
from report_plots import *  # noqa: E402,F401,F403
from report_runs import (  # noqa: E402
    controls_of, isa_family, load, platform_of, platform_warnings, run_kind, run_title, source_of,
    tabled_runs)
from report_tables import (  # noqa: E402
    agreement_section, frontier_table, peer_table, scale_table, summary_table, table)
from report_plots import compile_budget_section, plots  # noqa: E402
from report_models import models_section  # noqa: E402


LEGEND = (
    "`x eager` is the median over the row's quiet pairs (no neighbour took a CPU "
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
    "activations, gradients, oneDNN scratchpad).")

FULL = "REPORT-full.md"


def command_line(args):
    """The command that writes this report again (REPORT.md's first line)."""
    words = ["/usr/bin/python3", "tools/report.py"] + list(args.inputs)
    if args.compile_budget:
        words += ["--compile-budget", args.compile_budget]
    return " ".join(words)


def anchor(title):
    """GitHub's anchor of a heading."""
    out = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return out.replace(" ", "-")


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inputs", nargs="*", default=["results/runs/latest.json"])
    parser.add_argument("--out", default="results")
    parser.add_argument("--compile-budget", metavar="TSV",
                        help="a tools/torch_compile_budget.py run: its section and compile_budget.png")
    parser.add_argument("--section-only", action="store_true",
                        help="print one section alone (to stdout): with --compile-budget that one (and write "
                             "its plot), else the inputs' peer table (bench --peer)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
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
    # A models run's peers ran the models, not a problem: report_models.py.
    problem_peers = [row for row in every_row if not row.get("model")]
    if args.section_only:
        print("\n".join(peer_table(problem_peers, every_control)))
        return 0
    # The field's engines' rows have their own table (peer_table), and so do
    # the rows of a --peer run.
    rows = [row for row in every_row if not row.get("peer")]
    tabled = tabled_runs(runs)
    # Plots and the frontier compare rows across runs: of one ISA family.
    family = isa_family(runs[tabled[0]]) if tabled else None
    same_family = [r for r in rows if r["_run"] in tabled and isa_family(runs[r["_run"]]) == family]
    os.makedirs(args.out, exist_ok=True)
    made, note = plots(same_family, args.out)
    command = command_line(args)

    md = ["# remat-bench report", "",
          "Generated by `" + command + "` from these runs, with [" + FULL + "](" + FULL + ") (never "
          "edited by hand; tools/report_committed_test.py writes both again and compares):", ""]
    for run in runs:
        md.append(f"- `{run['_path']}`: `{run.get('command', '?')}` on {run.get('date', '?')}, "
                  f"{source_of(run)}; platform: {platform_of(run)}; {controls_of(run)}"
                  + (f"; the run took {run['wall_seconds']:.0f} s" if "wall_seconds" in run else ""))
    warnings = platform_warnings(runs)
    if warnings:
        md += [""] + warnings
    md += ["", LEGEND, ""]
    if made:
        md += ["Plots (below): " + "; ".join(f"`{file}`: {title}" for file, title in made) + ".",
               ""]

    full = ["# remat-bench report: every table", "",
            "Written with [REPORT.md](REPORT.md) by `" + command + "` (never edited by hand). "
            "Each run's platform, source and controls are in REPORT.md's list of runs.", "",
            LEGEND, ""]
    for index in tabled:
        run = runs[index]
        title = run_title(run)
        full += [f"## {title}", "", f"`{run.get('command', '?')}` on {run.get('date', '?')}: "
                 f"{controls_of(run)}.", ""]
        mine = [r for r in rows if r["_run"] == index]
        for problem in sorted({r.get("problem", "?") for r in mine}):
            full += [f"### {problem}", "", table([r for r in mine if r.get("problem") == problem]), ""]
        if run_kind(run) != "default":
            continue
        md += [f"## {isa_family(run)}: the default run `{run['_path']}`, case by case", "",
               f"`{run.get('command', '?')}` on {run.get('date', '?')}: {controls_of(run)}. "
               "Ratios are x eager of the same run; `none`: no row that is a result peaks below "
               f"eager. Every row: [{FULL}]({FULL}#{anchor(title)}).", "",
               summary_table(mine), ""]
    md += models_section(runs)
    full += agreement_section(runs, tabled)
    full += frontier_table(same_family)
    full += peer_table(problem_peers, every_control)
    full += scale_table(same_family)
    if args.compile_budget:
        full += compile_budget_section(args.compile_budget, args.out)
    sections = []
    for line in full:
        if line.startswith("## ") and line[3:] not in sections:
            sections.append(line[3:])
    md += [f"## In {FULL}", ""] + [f"- [{s}]({FULL}#{anchor(s)})" for s in sections] + [""]
    if made:
        md += ["## Plots", "",
               "Of the " + (family or "") + " runs with tables (the frontier: the case with the most "
               "schedules).", ""]
        for file, title in made:
            md += [f"### {title}", "", f"![{title}]({file})", ""]
    elif note:
        md += [note, ""]
    for name, lines in (("REPORT.md", md), (FULL, full)):
        with open(os.path.join(args.out, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"report: wrote {os.path.join(args.out, 'REPORT.md')}, {os.path.join(args.out, FULL)} "
          f"and {len(made)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
