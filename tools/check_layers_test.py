"""tools/check_layers.py on the workspace itself, and on made-up trees that
break a layer, so that the check is shown to fail where it must.

The workspace is found through this file: Bazel's runfiles link it to the
source tree (the build runs unsandboxed, .bazelrc), and its folder's parent
is the workspace.
"""

import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import check_layers  # noqa: E402


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


class CheckLayersTest(unittest.TestCase):

    def test_the_workspace_keeps_its_layers(self):
        root = os.path.dirname(HERE)
        self.assertTrue(os.path.exists(os.path.join(root, "engines", "api", "program.h")),
                        "workspace not found from %s" % HERE)
        problems, loops = check_layers.check(root)
        self.assertEqual(problems, [])
        self.assertEqual(loops, [])

    def test_an_include_upwards_and_a_cycle_are_named(self):
        root = tempfile.mkdtemp()
        try:
            write(root, "engines/api/program.h", "#include \"engines/schedule/schedule.h\"\n")
            write(root, "engines/schedule/schedule.h", "#include \"engines/api/program.h\"\n")
            write(root, "engines/api/program_test.cc", "#include \"harness/conformance.h\"\n")
            write(root, "harness/conformance.h", "#include <vector>\n")
            problems, loops = check_layers.check(root)
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("engines/api/program.h:1: engines/api (layer 0", problems[0])
            self.assertEqual(loops, [["engines/api", "engines/schedule", "engines/api"]])
        finally:
            shutil.rmtree(root)

    def test_a_folder_without_a_layer_is_named(self):
        root = tempfile.mkdtemp()
        try:
            write(root, "engines/newthing/x.cc", "int x;\n")
            problems, _ = check_layers.check(root)
            self.assertEqual(len(problems), 1)
            self.assertIn("engines/newthing has C++ code but no layer", problems[0])
        finally:
            shutil.rmtree(root)

    def test_outside_code_may_use_the_project_but_not_be_used_by_it(self):
        root = tempfile.mkdtemp()
        try:
            # An engine author's package: no layer_visibility(), includes
            # whatever its deps (the SDK) give it.
            write(root, "engines/mine/BUILD", 'cc_library(name = "mine", deps = ["//:engine_sdk"])\n')
            write(root, "engines/mine/mine.h", "#include \"engines/api/engine.h\"\n")
            write(root, "engines/api/engine.h", "#include <vector>\n")
            problems, _ = check_layers.check(root)
            self.assertEqual(problems, [])
            write(root, "engines/api/registry.cc", "#include \"engines/mine/mine.h\"\n")
            problems, _ = check_layers.check(root)
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("engines/api/registry.cc:1: includes engines/mine/mine.h of folder "
                          "engines/mine, which has no layer", problems[0])
            # A project package that forgot its layer is not outside code.
            write(root, "engines/mine/BUILD", 'package(default_visibility = layer_visibility())\n')
            problems, _ = check_layers.check(root)
            self.assertTrue(any("engines/mine has C++ code but no layer" in p for p in problems),
                            problems)
        finally:
            shutil.rmtree(root)

    def test_a_package_open_to_all_is_named(self):
        root = tempfile.mkdtemp()
        try:
            write(root, "engines/exec/BUILD", 'package(default_visibility = ["//visibility:public"])\n')
            write(root, "engines/plan/BUILD", 'load("//tools:layers.bzl", "layer_visibility")\n'
                  'package(default_visibility = layer_visibility())\n'
                  'cc_library(name = "x", visibility = ["//visibility:public"])\n')
            problems, _ = check_layers.check(root)
            self.assertEqual(len(problems), 3, problems)
            self.assertIn("engines/exec/BUILD: no package(default_visibility = layer_visibility())",
                          problems[1] if "plan" in problems[0] else problems[0])
            self.assertTrue(any("engines/plan/BUILD:3: a public target" in p for p in problems), problems)
        finally:
            shutil.rmtree(root)


if __name__ == "__main__":
    unittest.main()
