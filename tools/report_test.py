"""Tests of tools/report.py: the frontier case, the schedules' sections and
plots, the runs it tables, on results files written here (never results/
itself)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

MIB = 1 << 20


def row(params, engine, policy, ms, peak_mib, activations_mib=None, vs_eager=None, **extra):
    out = {"name": f"BM_ValueAndGrad/scan_stack/{params}/{engine}/{policy}",
           "problem": "scan_stack",
           "params": dict((k, int(v)) for k, v in (p.split("=") for p in params.split(","))),
           "engine": engine, "policy": policy, "iterations": 1, "real_time_ms": ms,
           "peak_bytes": int(peak_mib * MIB), "residual_bytes": 0, "flops_recomputed": 0,
           "vs_eager": vs_eager}
    if activations_mib is not None:
        out["peak_bytes_by_category"] = {"inputs": 256 * MIB, "gradients": 256 * MIB,
                                         "activations": int(activations_mib * MIB),
                                         "scratchpad": 0, "host": 0}
    out.update(extra)
    return out


def schedules_run():
    """A small --sweep=schedules: a frontier at L=256, two depths for the rest."""
    frontier = "L=256,d=512,N=256"
    rows = [row(frontier, "eager", "as-written", 400, 770, 256, 1.0),
            row(frontier, "recompute", "as-written", 520, 640, 128, 1.3),
            row(frontier, "recompute", "schedule:sqrt", 560, 538, 22, 1.4),
            row(frontier, "recompute", "schedule:revolve:4", 1000, 518, 2, 2.5),
            row(frontier, "recompute", "schedule:budget:64MiB", 600, 586, 70, 1.5),
            row(frontier, "recompute", "schedule:bisect", 900, 520, 4, 2.25)]
    for l, scale in ((16, 1 / 16), (64, 1 / 4)):
        params = f"L={l},d=512,N=256"
        rows += [row(params, "eager", "as-written", 400 * scale, 770 * scale, 256 * scale, 1.0),
                 row(params, "recompute", "schedule:sqrt", 560 * scale, 538 * scale, 5, 1.4),
                 row(params, "recompute", "schedule:bisect", 900 * scale, 520 * scale, 3, 2.25)]
    # A case with fewer schedules: not the frontier.
    rows.append(row("L=32,d=512,N=256", "eager", "as-written", 50, 98, 32, 1.0))
    rows.append(row("L=32,d=512,N=256", "recompute", "schedule:sqrt", 70, 74, 3, 1.4))
    return {"command": "tools/bazel run //harness:bench -- --sweep=schedules",
            "machine": {"cpu": "test", "cores": 2}, "date": "2026-01-01T00:00:00Z", "rows": rows}


def scale_run():
    big = "L=2048,d=1024,N=1024"
    return {"command": "tools/bazel run //harness:bench -- --sweep=scale",
            "machine": {"cpu": "test", "cores": 2}, "date": "2026-01-01T00:00:00Z",
            "rows": [row(big, "eager", "as-written", 0, 0, big=True,
                         error="the predicted peak of 17193797000 bytes exceeds the limit"),
                     row(big, "recompute", "schedule:sqrt", 63000, 8586, 390, big=True)]}


def run_report(tmp, named_runs):
    """Writes `named_runs` ((file name, run) pairs) under `tmp`, runs
    tools/report.py on them into tmp/out, and returns (REPORT.md's text, out)."""
    inputs = []
    for name, run in named_runs:
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            json.dump(run, f)
        inputs.append(path)
    out = os.path.join(tmp, "out")
    # The interpreter the README runs the report with (Debian's, where
    # python3-matplotlib goes), else this one.
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    subprocess.run([python, report.__file__] + inputs + ["--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "REPORT.md")) as f, open(os.path.join(out, "REPORT-full.md")) as g:
        return f.read() + g.read(), out


def report_of(named_runs):
    """REPORT.md of tools/report.py run on `named_runs` ((file name, run) pairs)."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
        return run_report(tmp, named_runs)[0]


class ReportTest(unittest.TestCase):

    def test_a_paired_ratio_wins_over_the_medians_ratio(self):
        frontier = "L=256,d=512,N=256"
        eager = row(frontier, "eager", "as-written", 400, 770, 256, 1.0)
        paired = row(frontier, "recompute", "as-written", 520, 640, 128, 1.3,
                     vs_eager_paired=1.25)
        plain = row(frontier, "recompute", "schedule:sqrt", 560, 538, 22, 1.4)
        self.assertEqual(report.time_vs_eager(paired, eager), 1.25)
        self.assertEqual(report.time_vs_eager(plain, eager), 1.4)
        del plain["vs_eager"]
        self.assertEqual(report.time_vs_eager(plain, eager), 560 / 400)

    def test_pareto_keeps_what_nothing_beats(self):
        self.assertEqual(report.pareto([(2, 5), (1, 10), (3, 7), (4, 1), (5, 1)]),
                         [(1, 10), (2, 5), (4, 1)])

    def test_the_frontier_is_the_case_with_the_most_schedules(self):
        rows = schedules_run()["rows"]
        for r in rows:
            r["_run"] = 0
        eager, others = report.frontier_case(rows)
        self.assertEqual(eager["params"]["L"], 256)
        self.assertEqual(len(others), 5)
        self.assertTrue(all(o["params"]["L"] == 256 for o in others))

    def test_report_has_the_frontier_table_the_scale_table_and_the_plots(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            md, out = run_report(tmp, (("schedules.json", schedules_run()),
                                       ("scale.json", scale_run())))
            self.assertIn("## Schedules on scan_stack L=256,N=256,d=512 relative to eager", md)
            # Sorted by time: sqrt (1.40) before bisect (2.25); peak / eager's.
            self.assertLess(md.index("recompute/schedule:sqrt | 560.0 |  | 1.40"),
                            md.index("recompute/schedule:bisect | 900.0 |  | 2.25"))
            self.assertIn("| 538.0 | 0.70 | 22.0 |", md)
            self.assertIn("## At scale", md)
            self.assertIn("| eager | refused: the predicted peak of 17193797000 bytes", md)
            self.assertIn("| recompute/schedule:sqrt | 63.0 | 8.38 | 390 | 0.25 | 0.25 |", md)
            # tools/bazel installs python3-matplotlib: the plots are part of
            # the report, and a test that skipped them would pass silently.
            self.assertNotIn("plots skipped", md)
            for png in ("schedules.png", "schedules_vs_depth.png"):
                self.assertTrue(os.path.getsize(os.path.join(out, png)) > 0, png)
                self.assertIn(f"({png})", md)
            self.assertIn("`schedules_vs_depth.png`: Peak memory vs depth for each schedule", md)

    def test_the_peers_table_pairs_each_engine_with_eager_of_its_case(self):
        case = "L=8,d=512,N=256"
        peer = lambda engine, policy, ms, **extra: dict(  # noqa: E731
            {"name": f"peer/scan_stack/{case}/{engine}/{policy}", "problem": "scan_stack",
             "params": {"L": 8, "d": 512, "N": 256}, "engine": engine, "policy": policy, "peer": True,
             "real_time_ms": ms, "vs_eager": ms / 40.0}, **extra)
        run = {"command": "tools/bazel run //harness:bench -- --peer", "machine": {"cpu": "test", "cores": 2},
               "date": "2026-01-01T00:00:00Z",
               "rows": [row(case, "eager", "as-written", 40, 100, 10, 1.0),
                        row(case, "eager", "as-written", 41.2, 100, 10, 1.03, control=True),
                        row(case, "recompute", "as-written", 50, 80, 5, 1.25),
                        peer("jax", "everything_saveable", 44), peer("jax", "as-written", 60),
                        peer("torch-compile", "everything_saveable", 0, error="unsupported: no"),
                        peer("torch-compile", "as-written", 80)]}
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            path = os.path.join(tmp, "peer.json")
            with open(path, "w") as f:
                json.dump(run, f)
            python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
            subprocess.run([python, report.__file__, path, "--out", tmp], check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(tmp, "REPORT-full.md")) as f:
                md = f.read()
        self.assertIn("## The field's engines, in the same run", md)
        self.assertIn("| scan_stack | L=8,N=256,d=512 | remat eager / recompute | 40.0 | 1.00 | 50.0 | 1.25 |", md)
        self.assertIn("| scan_stack | L=8,N=256,d=512 | jax | 44.0 | 1.10 | 60.0 | 1.50 |", md)
        self.assertIn("| scan_stack | L=8,N=256,d=512 | torch-compile | error: unsupported: no |  | 80.0 | 2.00 |", md)
        # The case's A/A control by the peers' measure, and what it says.
        self.assertIn("| scan_stack | L=8,N=256,d=512 | remat eager A/A | 41.2 | 1.03 |  |  |", md)
        self.assertIn("The A/A rows' least-time ratios lie between 1.030 and 1.030: two engines "
                      "whose ratios here differ by less than 3.0% are not told apart", md)
        # The control stays out of the remat rows (it is not recompute's or
        # eager's own row).
        self.assertIn("| scan_stack | L=8,N=256,d=512 | remat eager / recompute | 40.0 | 1.00 | 50.0 | 1.25 |", md)
        # A peer run without controls says it has none.
        run["rows"] = [r for r in run["rows"] if not r.get("control")]
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            path = os.path.join(tmp, "peer.json")
            with open(path, "w") as f:
                json.dump(run, f)
            python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
            section = subprocess.run([python, report.__file__, path, "--section-only", "--out", tmp],
                                     check=True, stdout=subprocess.PIPE, text=True).stdout
        self.assertIn("No A/A control ran beside these rows", section)
        self.assertNotIn("remat eager A/A |", section)
        # Peer rows stay out of the problem's own table.
        self.assertNotIn("jax/as-written", md.split("## The field's engines")[0])

    def test_a_models_run_sets_each_model_beside_its_peers(self):
        # remat's rows and the peers of one model, by program file; the
        # ratios, useful GFLOP/s (eager's FLOPs over each time), the share of
        # the ceiling (bound + stream floor over each time) and each side's
        # cost of checkpointing; a peer that failed shows its error; the
        # models' peer rows stay out of the problems' peer table.
        program = "/m/gpt2/program.txt"

        def mine(engine, policy, ms, **extra):
            r = {"name": f"BM_ValueAndGrad/gpt2@1x1024/{engine}/{policy}", "problem": "GPT2LMHeadModel",
                 "params": {}, "program_file": program, "engine": engine, "policy": policy,
                 "real_time_ms": ms, "peak_bytes": 3 * 2 ** 30, "flops_forward": 200e9,
                 "flops_backward": 400e9}
            r.update(extra)
            return r

        def peer(engine, policy, ms, **extra):
            r = {"name": f"peer/gpt2/{engine}/{policy}", "problem": "GPT2LMHeadModel", "model": "gpt2",
                 "model_label": "gpt2@1x1024", "program_file": program, "engine": engine, "policy": policy,
                 "peer": True, "real_time_ms": ms, "peak_rss_bytes": 2 ** 31}
            r.update(extra)
            return r

        # The bench records of_ceiling (bound + stream floor over the time)
        # and useful_gflops (eager's FLOPs over the time); older runs lack
        # them (the torch-checkpoint row here): blank cells, but the
        # recorded gflops of a peer.
        rows = [mine("onednn", "as-written", 2000, matmul_bound=True, stream_floor_ms=1000),
                mine("eager", "as-written", 4000, gflops=150.0, useful_gflops=150.0, of_ceiling=0.75),
                mine("eager", "as-written", 4100, control=True, vs_eager_paired=1.0),
                mine("recompute", "as-written", 5000, vs_eager_paired=1.2, gflops=130.0, useful_gflops=120.0,
                     of_ceiling=0.6),
                mine("recompute", "memory_budget:peak:min", 4400, vs_eager_paired=1.1, gflops=140.0),
                peer("torch", "everything_saveable", 3000, vs_eager=0.75, gflops=200.0, useful_gflops=200.0,
                     of_ceiling=1.0),
                peer("torch-checkpoint", "as-written", 3300, vs_eager=0.825, gflops=181.8),
                peer("torch-compile", "everything_saveable", 0, error="inductor failed"),
                peer("jax", "as-written", 6000, vs_eager=1.5)]
        run = {"command": "tools/bazel run //harness:bench -- --sweep=models",
               "machine": {"cpu": "test", "cores": 2}, "date": "2026-01-01T00:00:00Z", "rows": rows}
        text = report_of([("models.json", run)])
        self.assertIn("## The models people train, beside the field's engines", text)
        self.assertIn("| gpt2@1x1024 | remat eager | 4000.0 | 1.00 | 150.0 | 75% | 3.00 |", text)
        self.assertIn("| gpt2@1x1024 | remat recompute, as written | 5000.0 | 1.20 | 120.0 | 60% | 3.00 |", text)
        self.assertIn("| gpt2@1x1024 | remat recompute, memory_budget:peak:min | 4400.0 | 1.10 |  |  | 3.00 |",
                      text)
        self.assertIn("| gpt2@1x1024 | PyTorch eager | 3000.0 | 0.75 | 200.0 | 100% | 2.00 (RSS) |", text)
        self.assertIn("| gpt2@1x1024 | PyTorch, its checkpointing | 3300.0 | 0.82 | 181.8 |  | 2.00 (RSS) |", text)
        self.assertIn("| gpt2@1x1024 | torch.compile | error: inductor failed |", text)
        self.assertIn("| gpt2@1x1024 | JAX, program as written | 6000.0 | 1.50 |", text)
        self.assertIn("gpt2@1x1024: eager's matmuls alone 2000.0 ms, its other kernels' bytes at the stream "
                      "rate 1000.0 ms", text)
        self.assertIn("gpt2@1x1024: checkpointing as written costs remat +20% of its eager step, "
                      "PyTorch +10% of its own", text)
        self.assertNotIn("## The field's engines, in the same run", text)

    def test_the_compile_budget_section_and_its_gaps(self):
        # tools/torch_compile_budget.py's TSV: one problem, three budgets;
        # remat recomputes fewer FLOPs at B = 0.5, the same elsewhere.
        header = ["problem", "size", "budget", "torch_saved_bytes", "torch_saved_mask_bytes",
                  "torch_recomputed_flops", "torch_max_saved_bytes", "remat_saved_bytes",
                  "remat_recomputed_flops", "remat_recomputed_flops_all_ops", "remat_max_saved_bytes",
                  "remat_plan", "verdict", "remat_saved_bytes_at_torch_bytes",
                  "remat_recomputed_flops_at_torch_bytes", "remat_plan_at_torch_bytes", "verdict_at_torch_bytes"]
        lines = ["# torch 2.9.1; tools/torch_compile_budget.py --problems gpt --budgets 0,0.5,1",
                 "\t".join(header)]
        for b, tb, tf, rf2, v in (("0", 0, 4000000000, 4000000000, "equal"),
                                  ("0.5", MIB, 2000000000, 1500000000, "remat better by 500000000 FLOPs (25.0%)"),
                                  ("1", 2 * MIB, 0, 0, "equal")):
            lines.append("\t".join(str(x) for x in (
                "gpt", "B=4 T=64", b, tb, 0, tf, 2 * MIB, tb, rf2, rf2 + 5, 2 * MIB, "milp, proven optimal",
                "remat better", tb, rf2, "milp, proven optimal", v)))
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            tsv = os.path.join(tmp, "compile_budget.tsv")
            with open(tsv, "w") as f:
                f.write("\n".join(lines) + "\n")
            python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
            md = subprocess.run([python, report.__file__, "--compile-budget", tsv, "--section-only", "--out", tmp],
                                check=True, capture_output=True, text=True).stdout
            self.assertIn("## torch.compile's activation_memory_budget against remat's memory_budget:B", md)
            self.assertIn("### gpt (B=4 T=64)", md)
            self.assertIn("| 0.5 | 1.00 | 2.000 | 1.00 | 1.500 | milp, proven optimal | 1.00 | 1.500 | "
                          "remat better by 500000000 FLOPs (25.0%) |", md)
            self.assertIn("recomputes the same FLOPs in 2 of 3 cases; fewer in 1, at most 0.500 GFLOP fewer "
                          "(gpt, B = 0.5).", md)
            self.assertTrue(os.path.getsize(os.path.join(tmp, "compile_budget.png")) > 0)

    def test_each_run_names_its_platform_and_differing_isas_are_warned_about(self):
        avx512 = schedules_run()
        avx512["machine"] = {"cpu": "AMD EPYC", "cores": 2, "onednn": "oneDNN 2.6.3",
                             "onednn_isa": "avx512_core", "isa_cap": "",
                             "matmul_impl": "brg:avx512_core"}
        avx512["rows"][0]["matmul_impls"] = ["brg:avx512_core"]
        avx2 = schedules_run()
        avx2["machine"] = dict(avx512["machine"], onednn_isa="avx2", isa_cap="AVX2",
                               matmul_impl="brg:avx2", lanes="avx2")
        # A noise row: no ratio in the table, not in the frontier.
        noisy = avx2["rows"][1]
        noisy["noise"] = "x eager 1.05 below the FLOP floor 1.33"
        noisy["spread"] = 0.004
        md = report_of((("a.json", avx512), ("b.json", avx2)))
        self.assertIn("platform: AMD EPYC, 2 cores, oneDNN 2.6.3, ISA avx512_core (no cap), "
                      "matmul brg:avx512_core; rows' matmuls ran on brg:avx512_core", md)
        self.assertIn("ISA avx2 (cap AVX2), matmul brg:avx2, elementwise lanes avx2", md)
        # A capped run is an ISA family of its own, on purpose: tables of its
        # own, no warning.
        self.assertNotIn("differ in ISA", md)
        self.assertNotIn("differ in CPU", md)
        self.assertIn("## --sweep=schedules, AVX-512 (`", md)
        self.assertIn("## --sweep=schedules, AVX2 cap (`", md)
        avx2_tables = md.split("## --sweep=schedules, AVX2 cap")[1]
        self.assertIn("| recompute/as-written | 520.00 |  | noise | 0.4% |", avx2_tables)
        # The first run's rows stay out of the second's tables.
        self.assertNotIn("| recompute/as-written | 520.00 | 1.30 |", avx2_tables)
        # Two uncapped runs on different ISAs: their times are not comparable.
        uncapped = schedules_run()
        uncapped["machine"] = dict(avx2["machine"], isa_cap="")
        md = report_of((("a.json", avx512), ("c.json", uncapped)))
        self.assertIn("**Warning: the runs merged here differ in ISA** (avx2 in", md)
        self.assertEqual(report.ratio_to_eager(noisy), None)
        # One platform: no warning.
        for r in avx2["rows"]:
            r["_run"] = 1
        avx2["_path"] = "b.json"
        self.assertEqual(report.platform_warnings([avx2]), [])

    def test_each_run_names_the_commit_it_was_built_from(self):
        built = schedules_run()
        built["source"] = {"commit": "0123456789abcdef0123456789abcdef01234567",
                           "modified": False}
        edited = schedules_run()
        edited["source"] = {"commit": "fedcba9876543210fedcba9876543210fedcba98",
                            "modified": True}
        outside = schedules_run()
        outside["source"] = {"error": "`git rev-parse HEAD` failed in /x (no git, or not a checkout)"}
        old = schedules_run()
        md = report_of((("a.json", built), ("b.json", edited), ("c.json", outside),
                        ("d.json", old)))
        lines = [line for line in md.splitlines() if line.startswith("- `")]
        self.assertEqual(len(lines), 4, md)
        self.assertIn("on 2026-01-01T00:00:00Z, at commit 0123456789ab (tree as committed); "
                      "platform:", lines[0])
        self.assertIn(", at commit fedcba987654 (tracked files modified); platform:", lines[1])
        self.assertIn(", source not recorded (`git rev-parse HEAD` failed in /x (no git, or not "
                      "a checkout)); platform:", lines[2])
        self.assertIn(", source not recorded (a run from before the bench recorded its commit); "
                      "platform:", lines[3])

    def test_controls_are_named_per_run_and_an_untrusted_row_has_no_ratio(self):
        bad = schedules_run()
        frontier = "L=256,d=512,N=256"
        control = row(frontier, "eager", "as-written", 430, 770, 256, None,
                      vs_eager_paired=1.075, control=True)
        bad["rows"].insert(1, control)
        bad["rows"][2]["untrusted"] = "its control eager A/A control is off (x eager 1.075)"
        bad["controls"] = {"valid": False, "allowance": 0.02, "rows": 9, "trusted": 5,
                           "noise": 0, "untrusted": 4,
                           "checks": [{"case": "scan_stack/" + frontier,
                                       "variant": "eager A/A control", "kind": "a/a",
                                       "x_eager": 1.075, "ok": False,
                                       "why": "x eager 1.075, 7.5% from 1.00"}]}
        good = scale_run()
        good["controls"] = {"valid": True, "allowance": 0.02, "rows": 1, "trusted": 1,
                            "noise": 0, "untrusted": 0, "checks": [{"ok": True}]}
        good["wall_seconds"] = 351.4  # the bench's since 2026-12-08; older runs have none
        md = report_of((("bad.json", bad), ("good.json", good), ("old.json", scale_run())))
        self.assertIn("1 of 1 rows trustworthy; the run took 351 s", md)
        self.assertNotIn("9 rows trustworthy; the run took", md)
        self.assertIn("**ratios not valid**: scan_stack/L=256,d=512,N=256 eager A/A control: "
                      "x eager 1.075, 7.5% from 1.00; 5 of 9 rows trustworthy", md)
        self.assertIn("controls: all 1 within 2% of 1.00 x eager; 1 of 1 rows trustworthy", md)
        self.assertIn("no controls (a run from before they existed", md)
        self.assertIn("| recompute/as-written | 520.00 |  | untrusted |", md)
        # The control is evidence, not a row of the tables.
        self.assertNotIn("| 430.00 |", md)


    def test_a_paired_rows_times_are_its_median_pairs_and_agree_with_its_ratio(self):
        # The row's least time (431 ms) was taken while the machine ran
        # faster than in the pair whose ratio is its x eager: the tables
        # print that pair's two times, 560 over 400 = 1.40, not 431 beside
        # eager's own 400.
        run = schedules_run()
        for r in run["rows"]:
            if r["policy"] == "schedule:sqrt" and r["params"]["L"] == 256:
                r.update(real_time_ms=431.0, pair_time_ms=560.0, paired_eager_ms=400.0, vs_eager_paired=1.4)
        md = report_of((("schedules.json", run),))
        self.assertIn("| recompute/schedule:sqrt | 560.00 | 400.00 | 1.40 |", md)
        self.assertIn("| recompute/schedule:sqrt | 560.0 | 400.0 | 1.40 |", md)
        self.assertNotIn("431.0", md)

    def test_a_bound_row_is_named_and_its_ratio_is_eagers_share(self):
        # The bench's bound row for a case: eager's matmuls replayed bare,
        # paired with eager; its x eager is the share of eager's time they take.
        run = schedules_run()
        run["rows"].append(row("L=256", "onednn", "as-written", 300.0, 10.0, matmul_bound=True,
                               pair_time_ms=360.0, paired_eager_ms=400.0, vs_eager_paired=0.9))
        md = report_of((("schedules.json", run),))
        self.assertIn("| oneDNN matmuls alone | 360.00 | 400.00 | 0.90 |", md)
        self.assertNotIn("onednn/as-written", md)

    def test_a_microsecond_rows_times_keep_three_digits_so_they_agree_with_its_ratio(self):
        # 0.0545 / 0.0452 = 1.21; at two decimals both print 0.05, whose
        # quotient is 1.00 beside x eager 1.21.
        self.assertEqual(report.fmt_ms(0.0545), "0.0545")
        self.assertEqual(report.fmt_ms(0.452), "0.452")
        self.assertEqual(report.fmt_ms(3.456), "3.46")
        self.assertEqual(report.fmt_ms(1234.5), "1234.50")
        run = schedules_run()
        for r in run["rows"]:
            if r["policy"] == "schedule:sqrt" and r["params"]["L"] == 256:
                r.update(real_time_ms=0.05, pair_time_ms=0.0545, paired_eager_ms=0.0452,
                         vs_eager_paired=1.21)
        md = report_of((("schedules.json", run),))
        self.assertIn("| recompute/schedule:sqrt | 0.0545 | 0.0452 | 1.21 |", md)

    def test_two_default_runs_give_one_set_of_tables_and_their_agreement(self):
        def default_run(ratios):
            run = {"command": "tools/bazel run //harness:bench", "machine": {"onednn_isa": "avx512_core"},
                   "rows": [row("L=8,d=512,N=256", "eager", "as-written", 10, 50, None, 1.0,
                                vs_eager_paired=1.0, matmul_impls=["brg"])]}
            for policy, ratio in ratios:
                run["rows"].append(row("L=8,d=512,N=256", "recompute", policy, 10 * ratio, 40, None,
                                       None, vs_eager_paired=ratio, matmul_impls=["brg"]))
            return run
        first = default_run((("as-written", 1.25), ("nothing_saveable", 1.5)))
        second = default_run((("as-written", 1.26), ("nothing_saveable", 1.4)))
        md = report_of((("first.json", first), ("second.json", second)))
        self.assertEqual(md.count("## The default run, AVX-512"), 1)
        self.assertIn("## Two default runs back to back, AVX-512", md)
        self.assertIn("1 of 2 rows with matmuls that neither run flagged have x eager within 3%", md)
        # The row that differs most first.
        self.assertLess(md.index("| scan_stack/L=8,d=512,N=256/recompute/nothing_saveable | 1.500 | 1.400 |"),
                        md.index("| scan_stack/L=8,d=512,N=256/recompute/as-written | 1.250 | 1.260 |"))

    def test_each_family_gets_its_latest_valid_default_run_case_by_case(self):
        def default_run(date, valid, ratio, isa="avx512_core", cap=""):
            rows = [row("L=8,d=512,N=256", "eager", "as-written", 10, 50, None, 1.0, vs_eager_paired=1.0),
                    row("L=8,d=512,N=256", "recompute", "as-written", 10 * ratio, 40, None, None,
                        vs_eager_paired=ratio),
                    row("L=8,d=512,N=256", "recompute", "schedule:bisect", 30, 20, None, None,
                        vs_eager_paired=3.0)]
            return {"command": "tools/bazel run //harness:bench", "date": date,
                    "machine": {"onednn_isa": isa, "isa_cap": cap}, "rows": rows,
                    "controls": {"valid": valid, "allowance": 0.02, "rows": 3, "trusted": 3,
                                 "checks": [{"ok": valid, "why": "off"}]}}
        md = report_of((("old.json", default_run("2026-01-01", True, 1.25)),
                        ("new.json", default_run("2026-01-03", True, 1.3)),
                        ("newest_invalid.json", default_run("2026-01-04", False, 1.4)),
                        ("avx2.json", default_run("2026-01-02", False, 1.5, "avx2", "AVX2"))))
        short_page, full_page = md.split("# remat-bench report: every table")
        # The latest valid run of AVX-512; AVX2's only run, valid or not.
        self.assertIn("## AVX-512: the default run `", short_page)
        self.assertIn("new.json`, case by case", short_page)
        self.assertIn("## AVX2 cap: the default run `", short_page)
        self.assertEqual(full_page.count("## The default run, AVX-512 ("), 1)
        self.assertIn("new.json`)", full_page.split("## The default run, AVX-512 (")[1].split("\n")[0])
        # One line per case: eager, the least peak, the fastest below eager's.
        self.assertIn("| scan_stack | L=8,N=256,d=512 | 10.00 | 50.0 | recompute/schedule:bisect | 20.0 | 3.00 "
                      "| recompute/as-written | 40.0 | 1.30 |", short_page)
        self.assertNotIn("| problem | size | engine / policy |", short_page)
        # The rest is linked.
        self.assertIn("## In REPORT-full.md", short_page)
        self.assertIn("](REPORT-full.md#two-default-runs-back-to-back-avx-512)", short_page)


if __name__ == "__main__":
    unittest.main()
