"""Tests of tools/verbose_matmuls.py on synthetic ONEDNN_VERBOSE lines."""
import unittest

import verbose_matmuls


def line(prim, shape, ms):
    return f"onednn_verbose,exec,cpu,{prim},brg:avx512_core,undef,src_f32::blocked:ab:f0,,,{shape},{ms}\n"


class VerboseMatmulsTest(unittest.TestCase):
    def test_long_stretches_are_the_bound_and_the_rest_eager(self):
        lines = ["onednn_verbose,info,cpu,runtime:OpenMP\n",
                 "onednn_verbose,exec,cpu,primitive,implementation,prop_kind,md,attr,alg,shape,exec_time\n"]
        lines += [line("matmul", "2x3:3x4:2x4", 1.0)] * 4           # a bound replay
        lines += [line("eltwise", "24", 0.5), line("matmul", "2x3:3x4:2x4", 2.0)] * 3  # eager
        lines += [line("eltwise", "24", 0.5)] + [line("matmul", "5x5:5x5:5x5", 3.0)] * 2  # short
        got = verbose_matmuls.split(verbose_matmuls.executions(lines), stretch=4)
        self.assertEqual(got["2x3:3x4:2x4"], [4.0, 4, 6.0, 3])
        self.assertEqual(got["5x5:5x5:5x5"], [0.0, 0, 6.0, 2])
        self.assertNotIn("24", got)  # not a matmul: counted nowhere

    def test_no_input_is_an_error(self):
        import io
        import sys
        stdin, sys.stdin = sys.stdin, io.StringIO("")
        try:
            self.assertEqual(verbose_matmuls.main([]), 1)
        finally:
            sys.stdin = stdin


if __name__ == "__main__":
    unittest.main()
