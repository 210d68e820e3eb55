"""engine_conformance_test: the whole conformance suite for one engine.

Usable from any package of this workspace, one outside tools/layers.bzl's
table included (engines/example), and from another workspace that has
remat-bench as a repository named remat_bench (examples/outside_workspace,
which .ci/run builds and tests from there): the labels below are Label()s,
resolved in remat-bench's repository whoever loads this file, and name the
root package's public, testonly libraries. The suite reads its program
files through harness/runfiles.h, which finds them in either runfiles tree.
"""

load("@rules_cc//cc:defs.bzl", "cc_test")

def engine_conformance_test(name, engine, deps, shard_count = 2, fuzz_cases = 500, **kwargs):
    """Runs harness/conformance_test.cc against the engine registered as `engine`.

    Args:
      name: the test target's name.
      engine: the name the engine registers itself under (REMAT_REGISTER_ENGINE).
      deps: the engine's library (alwayslink = 1, so its registration links in).
      shard_count: shards to spread the problems over.
      fuzz_cases: random programs for the engine's fuzz test (<name>_fuzz_test).
      **kwargs: passed to cc_test.
    """

    # The suite is compiled once (//harness:conformance_suite, with eager,
    # the baseline every engine on its kernels is compared with bit for bit,
    # and the float64 oracle every engine is compared with within the
    # tolerance); a test per engine links it with the engine.
    cc_test(
        name = name,
        args = ["--engine=" + engine],
        shard_count = shard_count,
        deps = deps + [Label("//:conformance_suite")],
        **kwargs
    )

    # The random-program fuzzer (harness/fuzz_test.cc) on this engine: a few
    # hundred programs over the whole op set, nested regions, scans, chains,
    # policies and schedules, each against eager's bits or the oracle. Every
    # uninitialized block is poisoned (NaN): a kernel of any engine that
    # reads an output element or a scratchpad word before writing it fails
    # here, on every run, instead of giving a wrong value on some.
    cc_test(
        name = name.replace("_test", "") + "_fuzz_test",
        args = ["--engine=" + engine, "--cases=" + str(fuzz_cases)],
        env = {"REMAT_POISON_UNINITIALIZED": "1"},
        size = "medium",
        deps = deps + [Label("//:fuzz_suite")],
    )
