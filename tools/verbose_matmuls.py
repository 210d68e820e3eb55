"""oneDNN's own execution time of each matmul shape in ONEDNN_VERBOSE output,
split into the bench's matmul-bound replays and the rest (eager's runs).

The bound replays a case's matmuls back to back, so its executions come in
long stretches of matmuls with no other primitive between them; eager's
interleave with eltwise, binary and softmax primitives (its own loop
kernels print nothing). A stretch of at least --stretch matmuls counts as
the bound's. For transformer_stack at the bench size:

  ONEDNN_VERBOSE=1 bazel-bin/harness/bench --problems=transformer_stack \\
      --engines=eager --windows=1 | /usr/bin/python3 tools/verbose_matmuls.py --per-run 93

prints, per shape, the mean time of an execution in each, and with
--per-run (the matmuls of one run) the time of a run's matmuls in each.
"""
import argparse
import collections
import sys


def executions(lines):
    """(primitive, shape, ms) for each `onednn_verbose,...,exec,` line."""
    out = []
    for line in lines:
        f = line.strip().split(",")
        if len(f) < 6 or "exec" not in f[:3]:
            continue
        try:
            ms = float(f[-1])
        except ValueError:
            continue  # the header line
        i = f.index("exec")
        out.append((f[i + 2], f[-2], ms))
    return out


def split(execs, stretch):
    """Per shape: [bound ms, bound count, rest ms, rest count]."""
    by_shape = collections.defaultdict(lambda: [0.0, 0, 0.0, 0])
    i = 0
    while i < len(execs):
        j = i
        while j < len(execs) and execs[j][0] == "matmul":
            j += 1
        bound = j - i >= stretch
        for prim, shape, ms in execs[i:j]:
            s = by_shape[shape]
            if bound:
                s[0] += ms
                s[1] += 1
            else:
                s[2] += ms
                s[3] += 1
        i = max(j, i + 1)
    return by_shape


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stretch", type=int, default=50,
                        help="consecutive matmuls that make a bound replay (default 50)")
    parser.add_argument("--per-run", type=int, default=0,
                        help="matmuls in one run: prints a run's matmul time in each")
    args = parser.parse_args(argv)
    by_shape = split(executions(sys.stdin), args.stretch)
    if not by_shape:
        print("no matmul executions in the input (was ONEDNN_VERBOSE=1 set?)", file=sys.stderr)
        return 1
    print(f"{'shape':44s} {'bound us':>9s} {'n':>6s} {'eager us':>9s} {'n':>6s} {'eager/bound':>11s}")
    for shape, (bms, bn, ems, en) in sorted(by_shape.items(), key=lambda kv: -kv[1][2]):
        b = 1000 * bms / bn if bn else float("nan")
        e = 1000 * ems / en if en else float("nan")
        ratio = f"{e / b:11.2f}" if bn and en else f"{'':11s}"
        print(f"{shape:44s} {b:9.1f} {bn:6d} {e:9.1f} {en:6d} {ratio}")
    if args.per_run > 0:
        totals = [sum(v[k] for v in by_shape.values()) for k in range(4)]
        for name, ms, n in (("bound", totals[0], totals[1]), ("eager", totals[2], totals[3])):
            if n:
                print(f"{name}: {ms / (n / args.per_run):.2f} ms of matmuls a run "
                      f"({n / args.per_run:.1f} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
