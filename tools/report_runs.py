"""tools/report.py's runs: loading the bench's JSON, naming a row (its case
and variant), what a row's ratio is and whether it is a result, and what a
run is (its kind, ISA family, platform, source and controls). No tables, no
plots: report_tables.py and report_plots.py build on this."""

import json
import math
from collections import defaultdict

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



def run_kind(run):
    """'peer' for a run with the field's engines (its rows go to the peer
    table), the sweep's name for a --sweep run, else 'default'."""
    command = run.get("command", "")
    if "--sweep=models" in command.split():  # its peers are its own (report_models.py)
        return "models"
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



def controls_valid(run):
    """Whether the run's controls all came out within their allowance."""
    controls = run.get("controls")
    return isinstance(controls, dict) and bool(controls.get("valid"))


def tabled_runs(runs):
    """The indices (in input order) of the runs with tables of their own:
    each ISA family's latest valid default run (by its date, the later input
    on a tie; a family's latest run of any kind of controls where none is
    valid), and every --sweep run. The family's other default runs are
    evidence of agreement only; a --peer run's rows go to the peer table."""
    latest = {}
    tabled = []
    for i, run in enumerate(runs):
        kind = run_kind(run)
        if kind == "peer":
            continue
        if kind != "default":
            tabled.append(i)
            continue
        family = isa_family(run)
        rank = (controls_valid(run), run.get("date") or "", i)
        if family not in latest or rank > latest[family][0]:
            latest[family] = (rank, i)
    return sorted(tabled + [i for _, i in latest.values()])
