"""tools/report.py's tables: a run's rows, the frontier case relative to
eager, the field's engines beside remat's, the rows run at scale, and how
far two default runs of one ISA family agree."""

import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratio_agreement import agreement  # noqa: E402
from report_runs import (  # noqa: E402
    MIB, category_bytes, failed, fmt_ms, fmt_params, frontier_case, is_noise, isa_family,
    key_of, not_a_result, ratio_to_eager, run_kind, shown_times, time_vs_eager, variant)


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



def agreement_section(runs, tabled):
    """For each ISA family with two default runs or more: how far each run
    agrees with the one before it, row by row (tools/ratio_agreement.py's
    --matrix comparison: the rows that ran oneDNN matmuls). `tabled`: the
    indices of the runs with tables of their own."""
    out = []
    by_family = defaultdict(list)
    for index, run in enumerate(runs):
        if run_kind(run) == "default":
            by_family[isa_family(run)].append((index, run))
    for family, same in by_family.items():
        shown = [run["_path"] for index, run in same if index in tabled]
        for (_, a), (_, b) in zip(same, same[1:]):
            compared, agree, noise, diffs = agreement(a["rows"], b["rows"], 0.03, matrix=True)
            every, every_agree, _, _ = agreement(a["rows"], b["rows"], 0.03, matrix=True,
                                                 include_noise=True)
            out += [f"## Two default runs back to back, {family}", "",
                    f"`{a['_path']}` and `{b['_path']}` (the tables are "
                    f"{', '.join(f'`{p}`' for p in shown) or 'neither'}'s), row by row: "
                    f"{agree} of {compared} rows with matmuls that neither run flagged have "
                    f"x eager within 3% of each other ({noise} flagged in either run left out; "
                    f"with them, {every_agree} of {every}). The rows that differ most:", "",
                    "| row | x eager, first run | x eager, second run |",
                    "| --- | ---: | ---: |"]
            for _, name, va, vb in diffs[:8]:
                out.append(f"| {name.replace('BM_ValueAndGrad/', '')} | {va:.3f} | {vb:.3f} |")
            out.append("")
    return out


def summary_table(rows):
    """One line per case of a default run: eager's time and peak; the row
    with the least peak (a tie to the lower x eager) and its x eager; and of
    the rows that are results and peak below eager, the one with the lowest
    x eager. The case's every row is in REPORT-full.md."""
    out = ["| problem | size | eager ms | eager peak MiB | least peak: engine / policy | peak MiB | x eager "
           "| fastest below eager's peak | peak MiB | x eager |",
           "| --- | --- | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: |"]
    cases = []
    for r in rows:
        if key_of(r) not in cases:
            cases.append(key_of(r))

    def ratio(r):
        vs = ratio_to_eager(r)
        return not_a_result(r) if is_noise(r) else "" if vs is None else f"{vs:.2f}"

    def mib(r):  # three decimals under 1 MiB (the sin problems' kilobytes)
        v = r["peak_bytes"] / MIB
        return f"{v:.1f}" if v >= 1 else f"{v:.3f}"

    for case in sorted(cases):
        mine = [r for r in rows if key_of(r) == case and not failed(r) and "peak_bytes" in r
                and not r.get("matmul_bound")]
        eager = [r for r in mine if r.get("engine") == "eager" and r.get("policy") == "as-written"]
        if not eager:
            continue
        eager = eager[0]

        def by_ratio(r):
            vs = ratio_to_eager(r)
            return float("inf") if vs is None else vs

        least = min(mine, key=lambda r: (r["peak_bytes"], by_ratio(r)))
        below = [r for r in mine if r["peak_bytes"] < eager["peak_bytes"] and ratio_to_eager(r) is not None]
        fastest = min(below, key=lambda r: (by_ratio(r), r["peak_bytes"])) if below else None
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            case[0], fmt_params(case[1]), fmt_ms(shown_times(eager)[0]), mib(eager),
            variant(least), mib(least), ratio(least),
            variant(fastest) if fastest else "none", mib(fastest) if fastest else "",
            ratio(fastest) if fastest else ""))
    return "\n".join(out)
