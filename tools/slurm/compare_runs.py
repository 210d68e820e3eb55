#!/usr/bin/env python3
"""Whether two bench results files hold the same rows but for their times.

    python3 tools/slurm/compare_runs.py LOCAL.json MERGED.json

The rows must be the same, by name and in order, and agree in every field
but those a timing decides (TIMED_FIELDS: times, samples, ratios and what is
judged from them); each row that ran (no "error") must have its times in
both files. The sweep's merge (bench --merge) against a local run of the same
case list: what tools/slurm/slurm_sweep_test.sh checks. Prints each
difference and exits 1 if there is one.
"""
import json
import sys

# The fields a row's sampling decides: two runs of one row differ in them.
TIMED_FIELDS = {
    "flop_floor", "gflops", "iterations", "mean_time_ms", "median_time_ms", "noise",
    "noise_kinds", "of_matmul_bound", "overhead_fraction", "overhead_ns_per_call",
    "overhead_per_call_vs_eager", "pair_time_ms", "paired_eager_ms", "quiet", "quiet_samples",
    "real_time_ms", "samples", "samples_ms", "sampling_seconds", "spread", "stream_floor_ms",
    "untrusted", "vs_eager", "vs_eager_paired", "windows", "windows_apart",
}
# The matmul bound rows' memory (BM_OneDnnMatMulBound/...): the bound replays
# eager's matmuls with one buffer per address eager's matmuls read, and which
# addresses eager's allocator hands out depends on the rows the process ran
# before (layer_loss's bound holds 512 KiB more inputs after the sin_*
# cases than alone, run for run). A task runs other cases before it than a
# local run does, so these fields may differ; they are reported, not failed.
BOUND_PREFIX = "BM_OneDnnMatMulBound/"
HISTORY_FIELDS = {"peak_bytes", "max_bytes_used", "peak_bytes_by_category"}
# What each row that ran must have, in both files.
REQUIRED_TIMES = ("real_time_ms", "median_time_ms", "samples")


def compare(a, b, notes=None):
    """The differences between runs a and b, as lines; `notes` (a list) gets
    the bound rows' memory differences, which are not failures."""
    problems = []
    names_a = [r["name"] for r in a.get("rows", [])]
    names_b = [r["name"] for r in b.get("rows", [])]
    if names_a != names_b:
        only_a = sorted(set(names_a) - set(names_b))
        only_b = sorted(set(names_b) - set(names_a))
        problems.append(f"the rows differ: only in the first {only_a}, only in the second {only_b}"
                        + ("" if only_a or only_b else " (same rows, another order)"))
        return problems
    for ra, rb in zip(a["rows"], b["rows"]):
        for key in sorted((set(ra) | set(rb)) - TIMED_FIELDS):
            if ra.get(key) != rb.get(key):
                if ra["name"].startswith(BOUND_PREFIX) and key in HISTORY_FIELDS:
                    if notes is not None:
                        notes.append(f"{ra['name']}: {key}: {ra.get(key)!r} != {rb.get(key)!r} "
                                     "(a bound row's memory depends on the process's history)")
                    continue
                problems.append(f"{ra['name']}: {key}: {ra.get(key)!r} != {rb.get(key)!r}")
        for row in (ra, rb):
            if "error" in row:
                continue
            for key in REQUIRED_TIMES:
                if not isinstance(row.get(key), (int, float)) or row[key] <= 0:
                    problems.append(f"{row['name']}: no {key} ({row.get(key)!r})")
    return problems


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    runs = []
    for path in argv[1:]:
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"compare_runs: {path}: {e}", file=sys.stderr)
            return 2
    notes = []
    problems = compare(*runs, notes=notes)
    for n in notes:
        print(f"compare_runs: note: {n}")
    for p in problems:
        print(f"compare_runs: {p}")
    if problems:
        return 1
    print(f"compare_runs: {len(runs[0]['rows'])} rows agree in every field but times, "
          "times present in both")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
