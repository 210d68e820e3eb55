"""remat_bench_dependencies(): the repositories remat-bench's BUILD files need.

Bazel 4's WORKSPACE repositories are not transitive: a workspace that has
remat-bench as a repository must itself define those remat-bench's BUILD
files load or Bazel asks for. Both remat-bench's own WORKSPACE and another
workspace's (examples/outside_workspace/WORKSPACE) call this macro:

    local_repository(name = "remat_bench", path = "path/to/remat-bench")
    load("@remat_bench//:deps.bzl", "remat_bench_dependencies")
    remat_bench_dependencies()

Everything is offline: each repository is a folder on this machine. A
repository the calling workspace defined before the call is kept (its own
rules_cc or rules_java, say).
"""

# remat-bench's root, found through a file of it: a Label in a .bzl file is
# resolved in the .bzl file's repository, so this names remat-bench's
# WORKSPACE whichever workspace loads this file.
_ROOT_FILE = Label("//:WORKSPACE")

def _remat_bench_folder_impl(ctx):
    # local_repository's path is relative to the main workspace, which is not
    # remat-bench when another workspace calls this macro: the folder is
    # found from remat-bench's root instead, and linked entry by entry.
    folder = ctx.path(ctx.attr.root_file).dirname
    for part in ctx.attr.folder.split("/"):  # Bazel 4's get_child takes one name
        folder = folder.get_child(part)
    if not folder.exists:
        fail("remat_bench_dependencies: %s does not exist" % folder)
    for entry in folder.readdir():
        ctx.symlink(entry, entry.basename)

# A repository that is a folder of remat-bench (as local_repository, with a
# path relative to remat-bench's root rather than the main workspace's).
_remat_bench_folder = repository_rule(
    implementation = _remat_bench_folder_impl,
    attrs = {
        "folder": attr.string(mandatory = True),
        "root_file": attr.label(default = _ROOT_FILE, allow_single_file = True),
    },
    local = True,
)

def remat_bench_dependencies():
    """Defines @rules_cc, @rules_java and @remote_coverage_tools, unless defined."""

    # Debian's bazel-rules-cc is too new for Bazel 4.2.3, so @rules_cc is a
    # small local stand-in that forwards to the native cc rules.
    if not native.existing_rule("rules_cc"):
        _remat_bench_folder(name = "rules_cc", folder = "third_party/rules_cc")

    # rules_java from Debian's bazel-rules-java (installed by tools/bazel).
    if not native.existing_rule("rules_java"):
        native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")

    # `bazel test` asks for this repository by default; an empty stand-in.
    if not native.existing_rule("remote_coverage_tools"):
        _remat_bench_folder(name = "remote_coverage_tools", folder = "third_party/remote_coverage_tools")
