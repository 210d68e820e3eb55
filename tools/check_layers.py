#!/usr/bin/env python3
"""The layers of remat-bench, and the check that the code keeps them.

    python3 tools/check_layers.py [WORKSPACE]

Each folder of C++ code belongs to one layer; production code (every .h and
.cc but *_test.cc and the test helpers named in TEST_ONLY) may include
headers of its own folder and of folders in lower layers only, so no folder
depends on one above it and no two folders depend on each other. Tests sit
beside the code they test and may reach up (a test of the reverse-mode
executor runs the reference problems through the conformance suite).

Prints one line per violation, "FILE:LINE: FOLDER (layer N) includes HEADER
of FOLDER2 (layer M): ...", and the cycles among folders if any; exits 1 if
there is any, 0 otherwise. A folder with C++ code that the table does not
name is a violation too (a new package of the project states its layer in
tools/layers.bzl, whose LAYERS table also sets every package's Bazel
visibility), unless it is outside code: a package whose BUILD does not take
its visibility from the layers (an engine author's, as engines/example is),
which Bazel limits to the root package's public targets. Its own includes
are not layered; a layered folder that includes its headers is a violation.
"""

import ast
import os
import re
import sys



def read_layers(path):
    """LAYERS of tools/layers.bzl (a Python literal inside Starlark): the
    same table Bazel's visibility is built from."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^LAYERS = (\[.*?^\])", text, re.M | re.S)
    if not m:
        raise SystemExit("%s: no LAYERS = [...] table" % path)
    return ast.literal_eval(m.group(1))


LAYERS = read_layers(os.path.join(os.path.dirname(os.path.realpath(__file__)), "layers.bzl"))

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SKIP_DIRS = {".git", "third_party", "results", ".venv"}


def is_test(path):
    base = os.path.basename(path)
    return base.endswith("_test.cc") or base.endswith("_test.h")


def layer_of():
    out = {}
    for index, (_, folders) in enumerate(LAYERS):
        for f in folders:
            out[f] = index
    return out


def sources(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith("bazel-") and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith((".h", ".cc")):
                yield os.path.normpath(os.path.join(rel, name))


def is_outside(root, folder):
    """A package outside the layers: it has a BUILD that does not take its
    visibility from them."""
    build = os.path.join(root, folder, "BUILD")
    if not os.path.exists(build):
        return False
    with open(build, encoding="utf-8") as f:
        return "layer_visibility()" not in f.read()


def check(root):
    """Returns the violations as lines, and the folder-level cycles."""
    layers = layer_of()
    problems = []
    edges = {}
    for path in sources(root):
        folder = os.path.dirname(path)
        if folder not in layers:
            if not is_outside(root, folder):
                problems.append("%s: folder %s has C++ code but no layer (LAYERS in tools/layers.bzl)"
                                % (path, folder))
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            header = m.group(1)
            target = os.path.dirname(header)
            if target == folder or not os.path.exists(os.path.join(root, header)):
                continue  # own folder, or a system / third-party header
            line = text.count("\n", 0, m.start()) + 1
            if is_test(path):
                continue
            edges.setdefault(folder, set()).add(target)
            if target not in layers:
                problems.append("%s:%d: includes %s of folder %s, which has no layer" % (path, line, header, target))
            elif layers[target] >= layers[folder]:
                problems.append(
                    "%s:%d: %s (layer %d, %s) includes %s of %s (layer %d, %s): a folder may include "
                    "only its own headers and those of lower layers" %
                    (path, line, folder, layers[folder], LAYERS[layers[folder]][0], header, target,
                     layers[target], LAYERS[layers[target]][0]))
    problems += check_visibility(root)
    return problems, cycles(edges)


def check_visibility(root):
    """Every layered package's BUILD takes its default visibility from the
    layer table and declares no public target: the build then refuses a
    dependency that goes down-to-up, as this check refuses the include."""
    problems = []
    for _, folders in LAYERS:
        for folder in folders:
            build = os.path.join(root, folder, "BUILD")
            if not os.path.exists(build):
                continue
            with open(build, encoding="utf-8") as f:
                text = f.read()
            if "package(default_visibility = layer_visibility())" not in text and \
                    not re.search(r"^package\(default_testonly = (1|True)\)", text, re.M):
                problems.append("%s/BUILD: no package(default_visibility = layer_visibility()): "
                                "its targets would not be limited to the layers above it" % folder)
            for m in re.finditer(r'"//visibility:public"', text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append("%s/BUILD:%d: a public target: only the layer table (tools/layers.bzl) "
                                "says who may depend on a package" % (folder, line))
    return problems


def cycles(edges):
    """The folder-level cycles of `edges` (folder -> folders it includes), each
    as a list of folders, found by depth-first search."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems, loops = check(root)
    for p in problems:
        print(p)
    for loop in loops:
        print("include cycle among folders: %s" % " -> ".join(loop))
    if problems or loops:
        return 1
    print("layers: %d folders in %d layers, no include goes up, no folder cycle" %
          (sum(len(f) for _, f in LAYERS), len(LAYERS)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
