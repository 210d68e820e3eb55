"""Tests of tools/ratio_agreement.py on synthetic rows."""
import unittest

import ratio_agreement


def row(name, ratio, engine="recompute", noise=None, impls=("brg:avx512_core",)):
    r = {"name": name, "engine": engine, "vs_eager_paired": ratio, "matmul_impls": list(impls)}
    if noise:
        r["noise"] = noise
    return r


class AgreementTest(unittest.TestCase):
    def test_counts_rows_within_the_bound_and_skips_eager_and_noise(self):
        a = [row("e", 1.0, engine="eager"), row("x", 1.30), row("y", 2.00), row("z", 1.1, noise="busy"),
             row("only_a", 1.0)]
        b = [row("e", 1.0, engine="eager"), row("x", 1.32), row("y", 2.20), row("z", 1.1)]
        compared, agree, noise, diffs = ratio_agreement.agreement(a, b, 0.03)
        self.assertEqual((compared, agree, noise), (2, 1, 1))
        self.assertEqual(diffs[0][1], "y")
        self.assertAlmostEqual(diffs[0][0], 0.10)
        self.assertAlmostEqual(diffs[1][0], 0.02 / 1.30)


    def test_matrix_rows_only_and_noise_on_request(self):
        a = [row("m", 1.30), row("s", 0.20, impls=()), row("n", 1.0, noise="busy")]
        b = [row("m", 1.31), row("s", 0.30, impls=()), row("n", 1.5)]
        compared, agree, noise, diffs = ratio_agreement.agreement(a, b, 0.03, matrix=True)
        self.assertEqual((compared, agree, noise), (1, 1, 1))
        compared, agree, noise, diffs = ratio_agreement.agreement(
            a, b, 0.03, matrix=True, include_noise=True)
        self.assertEqual((compared, agree, noise), (2, 1, 1))
        self.assertEqual(diffs[0][1], "n")


if __name__ == "__main__":
    unittest.main()
