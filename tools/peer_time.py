#!/usr/bin/env python3
"""The field's engines timed on a remat program, as their users run them.

    .venv/bin/python tools/peer_time.py --engine jax|torch|torch-compile DIR [--repeats 5] [--max-seconds S]

DIR is what `remat conform` writes for a case (program.txt, <input>.npy,
case.json with "wrt"); //harness:bench --peer=... writes one per case. The
program runs as the engine's user would write it:
  jax            jax.jit(jax.value_and_grad(f, argnums=wrt)), regions as
                 jax.checkpoint with their policy (tools/jax_engine.py's
                 Builder), on XLA's default CPU threads
  torch          eager autograd, regions as torch.utils.checkpoint
                 (use_reentrant=False) or selective checkpointing
                 (tools/torch_engine.py's Interpreter)
  torch-compile  the same function under torch.compile (inductor, its
                 default mode); compiling is not timed
A run is one value and every gradient in "wrt". After one warm-up run (the
compile, for jax and torch-compile) it times --repeats runs (fewer once
they took --max-seconds; one at least) and prints one
JSON object: {"engine", "version", "threads", "min_ms", "median_ms",
"times_ms", "compile_seconds", "loss", "peak_rss_bytes"}; or "unsupported: WHY" and exit 77
when the engine cannot run the program as asked (tools/conform.h's rule);
exit 3 when the engine is not installed.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from program_text import load_case  # noqa: E402

UNSUPPORTED_EXIT = 77
NOT_INSTALLED_EXIT = 3


def timed(step, repeats, max_seconds=None):
    """(the first run's loss, its seconds: the compile and warm-up, each
    timed run's milliseconds): two warm-up runs, then `repeats` timed runs,
    or fewer once the timed runs have taken max_seconds (at least one)."""
    start = time.perf_counter()
    loss = step()
    compile_seconds = time.perf_counter() - start
    step()  # a second warm-up: torch.compile's first backward may recompile
    times = []
    while len(times) < repeats and (max_seconds is None or not times or sum(times) < 1e3 * max_seconds):
        start = time.perf_counter()
        step()
        times.append(1e3 * (time.perf_counter() - start))
    return loss, compile_seconds, times


def run_jax(d, repeats, max_seconds=None):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import numpy as np
        import jax
        import jax.ad_checkpoint  # noqa: F401 - checkpoint_name
    except ImportError as e:
        print("peer_time: JAX is not installed (%s)" % e, file=sys.stderr)
        return NOT_INSTALLED_EXIT, None
    import jax_engine
    jax.config.update("jax_enable_x64", False)
    jax.config.update("jax_default_matmul_precision", "highest")
    program, wrt, arrays = load_case(d, np)
    names = [name for _, name, _ in program.params]
    args = [jax.numpy.asarray(a.astype(np.int32 if pid in program.int_params else np.float32))
            for (pid, _, _), a in zip(program.params, arrays)]
    try:
        f_and_state = jax_engine.Builder(jax, program).function()
    except jax_engine.Unsupported as e:
        print("unsupported: %s" % e)
        return UNSUPPORTED_EXIT, None
    argnums = tuple(names.index(n) for n in wrt)
    step_fn = jax.jit(jax.value_and_grad(lambda *a: f_and_state(*a)[0], argnums=argnums))

    def step():
        loss, grads = step_fn(*args)
        jax.block_until_ready(grads)
        return float(loss)

    loss, compile_seconds, times = timed(step, repeats, max_seconds)
    return 0, {"engine": "jax", "version": jax.__version__, "threads": "XLA default (%d cores)" % os.cpu_count(),
               "loss": loss, "compile_seconds": compile_seconds, "times_ms": times}


def run_torch(d, repeats, compile_it, max_seconds=None):
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print("peer_time: PyTorch is not installed (%s)" % e, file=sys.stderr)
        return NOT_INSTALLED_EXIT, None
    import torch_engine
    torch.set_num_threads(os.cpu_count() or 1)
    program, wrt, arrays = load_case(d, np)
    names = [name for _, name, _ in program.params]
    args = torch_engine.torch_arguments(torch, np, program, arrays, wrt)
    wanted = [args[names.index(n)] for n in wrt]
    interp = torch_engine.Interpreter(torch, np, program)

    def f(*a):
        interp.held = []
        return interp.run(program, list(a), "program %s" % program.name)

    fn = torch.compile(f) if compile_it else f

    def step():
        loss = fn(*args)
        torch.autograd.grad(loss, wanted, allow_unused=True)
        return loss.item()

    try:
        loss, compile_seconds, times = timed(step, repeats, max_seconds)
    except torch_engine.Unsupported as e:
        print("unsupported: %s" % e)
        return UNSUPPORTED_EXIT, None
    return 0, {"engine": "torch-compile" if compile_it else "torch", "version": torch.__version__,
               "threads": torch.get_num_threads(), "loss": loss, "compile_seconds": compile_seconds,
               "times_ms": times}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", required=True, choices=["jax", "torch", "torch-compile"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-seconds", type=float,
                        help="stop timing once the timed runs took this long (at least one run)")
    parser.add_argument("dir")
    o = parser.parse_args(argv[1:])
    if o.repeats < 1:
        raise SystemExit("peer_time: --repeats %d: expected at least 1" % o.repeats)
    if o.max_seconds is not None and not o.max_seconds > 0:
        raise SystemExit("peer_time: --max-seconds %g: expected a positive number" % o.max_seconds)
    if o.engine == "jax":
        status, out = run_jax(o.dir, o.repeats, o.max_seconds)
    else:
        status, out = run_torch(o.dir, o.repeats, o.engine == "torch-compile", o.max_seconds)
    if status != 0:
        return status
    out["min_ms"] = min(out["times_ms"])
    out["median_ms"] = statistics.median(out["times_ms"])
    # The process's peak resident set: the framework, the case and what its
    # allocator kept (not remat's tracked peak: another measure).
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
