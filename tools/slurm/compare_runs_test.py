"""tools/slurm/compare_runs.py: rows agree but for their times, or say how not."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_runs  # noqa: E402


def row(name, ms=1.0, **fields):
    r = {"name": name, "engine": "eager", "peak_bytes": 100, "real_time_ms": ms,
         "median_time_ms": ms, "samples": 5, "vs_eager": 1.0}
    r.update(fields)
    return r


class CompareRunsTest(unittest.TestCase):
    def test_times_may_differ(self):
        a = {"rows": [row("a", 1.0), row("b", 2.0)]}
        b = {"rows": [row("a", 1.5, vs_eager=1.1), row("b", 2.5, spread=0.3)]}
        self.assertEqual(compare_runs.compare(a, b), [])

    def test_other_fields_may_not(self):
        a = {"rows": [row("a")]}
        b = {"rows": [row("a", peak_bytes=101)]}
        self.assertEqual(compare_runs.compare(a, b), ["a: peak_bytes: 100 != 101"])

    def test_a_bound_rows_memory_is_noted(self):
        a = {"rows": [row("BM_OneDnnMatMulBound/c", peak_bytes=1)]}
        b = {"rows": [row("BM_OneDnnMatMulBound/c", peak_bytes=2)]}
        notes = []
        self.assertEqual(compare_runs.compare(a, b, notes), [])
        self.assertEqual(len(notes), 1)
        self.assertIn("peak_bytes: 1 != 2", notes[0])

    def test_rows_must_match(self):
        problems = compare_runs.compare({"rows": [row("a")]}, {"rows": [row("b")]})
        self.assertEqual(len(problems), 1)
        self.assertIn("only in the first ['a']", problems[0])
        problems = compare_runs.compare({"rows": [row("a"), row("b")]}, {"rows": [row("b"), row("a")]})
        self.assertIn("another order", problems[0])

    def test_times_must_be_present(self):
        problems = compare_runs.compare({"rows": [row("a")]}, {"rows": [row("a", samples=0)]})
        self.assertEqual(problems, ["a: no samples (0)"])
        failed = row("a", error="refused", real_time_ms=0)
        self.assertEqual(compare_runs.compare({"rows": [failed]}, {"rows": [failed]}), [])


if __name__ == "__main__":
    unittest.main()
