"""tools/jax_engine.py's reading of remat's policy and schedule texts:
the jax.checkpoint policy of a checkpoint statement's policy= (Policy::Parse's
forms), and K of a "checkpoint_every:K" schedule."""

from jax_engine_errors import ProgramError, Unsupported
from program_text import schedule_count

CHECKPOINT_EVERY = "checkpoint_every:"


def checkpoint_every(schedule, where):
    """K of a "checkpoint_every:K" schedule (K >= 1), as engines/api's
    CheckpointEvery reads it."""
    try:
        return schedule_count(schedule, CHECKPOINT_EVERY[:-1])
    except ValueError:
        raise ProgramError("%s: schedule %r: checkpoint_every takes a number of blocks >= 1" % (where, schedule))


def jax_policy(jax, spec, where):
    """The jax.checkpoint policy for remat's policy text `spec` (Policy::Parse's
    forms: "NAME", "NAME:a,b", "save_from_both_policies:P+Q",
    "save_and_offload_only_these_names:a,b/c,d"). Returns (policy, offloads):
    offloads is True when the policy moves residuals to the host."""
    cp = jax.checkpoint_policies
    head, _, args = spec.partition(":")
    names = [n for n in args.split(",") if n]  # Policy's SplitNames: empty items dropped
    plain = {
        "everything_saveable": cp.everything_saveable,
        "nothing_saveable": cp.nothing_saveable,
        "dots_saveable": cp.dots_saveable,
        "checkpoint_dots": cp.dots_saveable,
        "dots_with_no_batch_dims_saveable": cp.dots_with_no_batch_dims_saveable,
        "checkpoint_dots_with_no_batch_dims": cp.dots_with_no_batch_dims_saveable,
    }
    if head in plain:
        if args:
            raise ProgramError("%s: policy %r: %s takes no names" % (where, spec, head))
        return plain[head], False
    if head == "save_only_these_names":
        return cp.save_only_these_names(*names), False
    if head == "save_any_names_but_these":
        return cp.save_any_names_but_these(*names), False
    if head == "save_anything_except_these_names":
        return cp.save_anything_except_these_names(*names), False
    if head == "save_from_both_policies":
        first, plus, second = args.partition("+")  # Policy::Parse splits at the first '+'
        if not plus:
            raise ProgramError("%s: policy %r: expected save_from_both_policies:P+Q" % (where, spec))
        a, a_offloads = jax_policy(jax, first, where)
        b, b_offloads = jax_policy(jax, second, where)
        return cp.save_from_both_policies(a, b), a_offloads or b_offloads
    if head == "save_and_offload_only_these_names":
        saved, _, offloaded = args.partition("/")
        return cp.save_and_offload_only_these_names(
            names_which_can_be_saved=[n for n in saved.split(",") if n],
            names_which_can_be_offloaded=[n for n in offloaded.split(",") if n],
            offload_src="device", offload_dst="pinned_host"), True
    if head == "offload_dot_with_no_batch_dims":
        if args:
            raise ProgramError("%s: policy %r: %s takes no names" % (where, spec, head))
        return cp.offload_dot_with_no_batch_dims(offload_src="device", offload_dst="pinned_host"), True
    if head == "memory_budget":
        raise Unsupported("%s: checkpoint policy %r (remat's own planner; JAX has no memory_budget policy)"
                          % (where, spec))
    raise Unsupported("%s: checkpoint policy %r (not one of jax.checkpoint_policies)" % (where, spec))
