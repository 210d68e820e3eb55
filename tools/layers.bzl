"""The layers of remat-bench: one table, read by two enforcers.

Bottom up. Each folder of C++ code belongs to one layer. Production code of
a folder may depend on its own folder and on folders of lower layers only:
  - tools/check_layers.py reads LAYERS (this file's literal) and fails on an
    #include that goes up or sideways, and on any folder-level cycle;
  - every BUILD file sets `package(default_visibility = layer_visibility())`,
    so Bazel refuses a dependency from a lower or equal layer's package.
Tests sit beside the code they test and may reach up (a test of the
executor runs the reference problems through the conformance suite): they
depend on the `testonly` aliases named `*_for_tests` that the upper
packages export, which Bazel lets only test targets use.
A new package of the project states its layer here.

A package the table does not name is outside code (an engine author's, in
this workspace or another): it may use the root package's public targets
(`//:engine_sdk`, the suite's `engine_conformance_test` from
//harness:conformance.bzl) and nothing else, which Bazel's visibility
enforces; no package of the project may depend on it. engines/example is
one, written the way an author outside the project would;
examples/outside_workspace is one in a workspace of its own.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

LAYERS = [
    # errors, units, shapes and tensors, the memory tracker, the Program IR,
    # its text, policies and schedule specs, the ops' definitions and the
    # Kernels interface, the Engine interface and its registry
    ("api", ["engines/api"]),
    # kernel tables (f32 on oneDNN, f64 plain loops); schedules for scans and
    # chains; static analyses of a Program (what is saved); the reference
    # problems (traced functions over the api)
    ("kernels, schedules, analyses, problems",
     ["engines/onednn", "engines/reference", "engines/schedule", "engines/plan", "problems"]),
    # the contract's building blocks: accumulation, run memory, stats, listing
    ("exec", ["engines/exec"]),
    # planners: memory_budget (knapsack, MILP), peak budgets
    ("planners", ["engines/budget"]),
    # the reverse-mode executor and the planners it runs
    ("executor", ["engines/autodiff"]),
    # the engines
    ("engines", ["engines/eager", "engines/recompute", "engines/planned", "engines/dtr",
                 "engines/oracle"]),
    # the list of them all (//engines:all), which the registry finds by name
    ("every engine", ["engines"]),
    # the conformance suite, the bench and their sweeps
    ("suite and bench", ["harness"]),
    # the gallery of faulty engines, run against the suite (test-only)
    ("gallery", ["harness/gallery"]),
    # the command line and its tools
    ("tools", ["tools"]),
    ("fuzzers", ["tools/fuzz"]),
]

def _layer_index(package):
    for index, entry in enumerate(LAYERS):
        if package in entry[1]:
            return index
    fail("package %s has no layer: add it to LAYERS in //tools:layers.bzl" % package)

def test_alias(name, actual):
    """`name`: a testonly library that only re-exports the library `actual`,
    which any package's tests may depend on, whatever their layer; Bazel
    refuses it to production code. (Not an alias: Bazel ignores an alias's
    own testonly.)"""
    cc_library(
        name = name,
        testonly = True,
        visibility = ["//visibility:public"],
        deps = [actual],
    )

def layer_visibility():
    """The default visibility of the calling package: every package of a
    higher layer, and the top level's aliases and test suites."""
    mine = _layer_index(native.package_name())
    out = ["//:__pkg__"]
    for index, entry in enumerate(LAYERS):
        if index > mine:
            out += ["//%s:__pkg__" % p for p in entry[1]]
    return out
