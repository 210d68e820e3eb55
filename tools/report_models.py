"""tools/report.py's section on `//harness:bench -- --sweep=models`: each
real-size model's remat rows beside the field's engines on the same model,
with the step time, the useful GFLOP/s, the share of the ceiling the bench
printed and the peak, and each side's cost of checkpointing."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_runs import failed, is_noise, ratio_to_eager  # noqa: E402

GIB = 2.0 ** 30

# (engine, policy) of a row -> what the table calls it, in the table's order.
ENGINES = [
    (("eager", "as-written"), "remat eager"),
    (("recompute", "as-written"), "remat recompute, as written"),
    (("recompute", "memory_budget:peak:min"), "remat recompute, memory_budget:peak:min"),
    (("torch", "everything_saveable"), "PyTorch eager"),
    (("torch-checkpoint", "as-written"), "PyTorch, its checkpointing"),
    (("torch-compile", "everything_saveable"), "torch.compile"),
    (("jax", "everything_saveable"), "JAX, program without regions"),
    (("jax", "as-written"), "JAX, program as written"),
]

LEGEND = (
    "Rows of `//harness:bench -- --sweep=models` (harness/bench_models.h): each model of "
    "tools/real_models.py built from its configuration, exported once (tools/model_time.py), "
    "its remat rows run on the export's inputs (the model's initial weights, its token ids); "
    "PyTorch's rows time the model itself (tools/model_time.py time: eager autograd with "
    "checkpointing off, with the model's own checkpointing, and torch.compile of it without), "
    "JAX's the exported program (tools/peer_time.py: jax.jit of value_and_grad, regions as "
    "jax.checkpoint). Peers: the least of 5 steps after 2 warm-ups; remat's rows: the least "
    "quiet run (eager) or the paired median (x eager). `x remat eager`: the row's time over "
    "remat eager's (paired for remat's rows, least times for the peers). `GFLOP/s`: remat "
    "eager's FLOPs of one step (forward and backward, no recomputation: the useful work, the "
    "same for every engine) over the row's time (runs before the bench recorded it: remat "
    "eager's and the peers' only). `of ceiling`: the case's ceiling (eager's "
    "matmuls alone, timed bare, plus its other kernels' bytes at this machine's stream rate: "
    "the least time of an engine that runs each op as a pass of its own) over the row's "
    "time, as the bench recorded it (`of_ceiling`; blank in runs before it did); in runs made "
    "before 2026-12-08 the bound timed matmuls only, so where convolutions do the work "
    "(ResNet-50) the ceiling left their arithmetic out and the share reads low; since, it times "
    "the convolutions too. `peak`: remat's tracker's high-water mark (every byte remat allocates); for the "
    "peers the process's peak resident set (the model, the framework and its allocator's "
    "cache), which is not the same measure. Bits differ: every peer runs its own kernels, "
    "GPT-2's dropout draws PyTorch's random numbers in PyTorch's rows and remat's Philox "
    "(as jnp ops) in JAX's.")


def _ms(row):
    return row.get("real_time_ms") if not failed(row) and row.get("real_time_ms") else None


def models_section(runs):
    """The section's lines for every --sweep=models run among `runs` (each
    with its "_run" index and rows), or [] where there is none."""
    out = []
    for index, run in enumerate(runs):
        rows = run.get("rows", [])
        labels = {}
        for r in rows:
            if r.get("model_label") and r.get("program_file"):
                labels.setdefault(r["program_file"], r["model_label"])
        if not labels:
            continue
        if not out:
            out += ["## The models people train, beside the field's engines", "", LEGEND, ""]
        out += [f"`{run.get('command', '?')}` (`{run.get('_path', '?')}`) on {run.get('date', '?')}:", "",
                "| model | engine | step ms | x remat eager | GFLOP/s | of ceiling | peak GiB |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        notes, ceilings = [], []
        for program, label in labels.items():
            mine = [r for r in rows if r.get("program_file") == program]
            by = {}
            for r in mine:
                if not r.get("control") and not r.get("matmul_bound"):
                    by.setdefault((r.get("engine"), r.get("policy")), r)
            bound = next((r for r in mine if r.get("matmul_bound") and not failed(r)), None)
            eager = by.get(("eager", "as-written"))
            if bound and _ms(bound) and isinstance(bound.get("stream_floor_ms"), (int, float)):
                ceilings.append(f"{label}: eager's matmuls alone {_ms(bound):.1f} ms, its other kernels' bytes "
                                f"at the stream rate {bound['stream_floor_ms']:.1f} ms")
            for key, name in ENGINES:
                r = by.get(key)
                if r is None:
                    continue
                ms = _ms(r)
                if ms is None:
                    out.append(f"| {label} | {name} | error: {r.get('error', '?')[:80].replace('|', '/')} "
                               "|  |  |  |  |")
                    continue
                if r.get("peer"):
                    ratio = r.get("vs_eager")
                    peak = r.get("peak_rss_bytes")
                    peak_text = f"{peak / GIB:.2f} (RSS)" if peak else ""
                else:
                    ratio = 1.0 if key == ("eager", "as-written") else ratio_to_eager(r)
                    peak_text = f"{r['peak_bytes'] / GIB:.2f}" if r.get("peak_bytes") else ""
                ratio_text = "noise" if not r.get("peer") and is_noise(r) else (
                    "" if ratio is None else f"{ratio:.2f}")
                gflops = r.get("useful_gflops", r.get("gflops") if r.get("peer") or key[0] == "eager" else None)
                gflops_text = "" if gflops is None else f"{gflops:.1f}"
                share = r.get("of_ceiling")
                share_text = "" if share is None else f"{100 * share:.0f}%"
                out.append(f"| {label} | {name} | {ms:.1f} | {ratio_text} | {gflops_text} | {share_text} | "
                           f"{peak_text} |")
            torch_ms = _ms(by[("torch", "everything_saveable")]) if ("torch", "everything_saveable") in by else None
            torch_cp = by.get(("torch-checkpoint", "as-written"))
            recompute = by.get(("recompute", "as-written"))
            if torch_ms and torch_cp and _ms(torch_cp) and recompute and ratio_to_eager(recompute):
                notes.append(f"{label}: checkpointing as written costs remat {100 * (ratio_to_eager(recompute) - 1):+.0f}% "
                             f"of its eager step, PyTorch {100 * (_ms(torch_cp) / torch_ms - 1):+.0f}% of its own")
        out += [""]
        if ceilings:
            out += ["The ceilings (`of ceiling` is their sum over the row's time): " + "; ".join(ceilings) + ".", ""]
        if notes:
            out += ["The cost of the model's own checkpointing, each engine against its own eager step: "
                    + "; ".join(notes) + ".", ""]
    return out
