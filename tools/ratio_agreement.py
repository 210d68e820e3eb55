#!/usr/bin/env python3
"""How far two bench runs agree on each row's x eager.

    python3 tools/ratio_agreement.py results/bench-A.json results/bench-B.json [--within 0.03]
        [--matrix] [--include-noise]

For every row that has a paired x eager (vs_eager_paired) in both files, is not
eager's own, and neither run flagged as noise: the relative difference of the
two ratios, |a - b| / min(a, b). Prints "N/M within 3%; K noise in either run"
and the rows that differ most. Exits 0 either way (a report, not a gate).

--matrix: only the rows whose runs executed oneDNN matmuls (matmul_impls not
empty in both): issue 11's "every matrix row", leaving out the scalar sin
chains, whose time is mostly engine overhead. --include-noise: compare the
rows flagged as noise too (their numbers are in the JSON), to see what the
flags left out.
"""
import argparse
import json
import sys


def agreement(a_rows, b_rows, within, matrix=False, include_noise=False):
    b_by_name = {r["name"]: r for r in b_rows}
    compared, agree, noise, diffs = 0, 0, 0, []
    for a in a_rows:
        b = b_by_name.get(a["name"])
        if b is None or a.get("engine") == "eager":
            continue
        if matrix and not (a.get("matmul_impls") and b.get("matmul_impls")):
            continue
        va, vb = a.get("vs_eager_paired"), b.get("vs_eager_paired")
        if va is None or vb is None:
            continue
        if a.get("noise") or b.get("noise"):
            noise += 1
            if not include_noise:
                continue
        compared += 1
        d = abs(va - vb) / min(va, vb)
        agree += d <= within
        diffs.append((d, a["name"], va, vb))
    diffs.sort(reverse=True)
    return compared, agree, noise, diffs


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--within", type=float, default=0.03)
    parser.add_argument("--worst", type=int, default=8)
    parser.add_argument("--matrix", action="store_true")
    parser.add_argument("--include-noise", action="store_true")
    args = parser.parse_args(argv)
    with open(args.a) as f:
        a_rows = json.load(f)["rows"]
    with open(args.b) as f:
        b_rows = json.load(f)["rows"]
    compared, agree, noise, diffs = agreement(a_rows, b_rows, args.within, args.matrix,
                                              args.include_noise)
    what = "matrix rows" if args.matrix else "rows"
    noise_text = "compared too" if args.include_noise else "left out"
    print(f"{agree}/{compared} {what} within {args.within:.0%}; {noise} noise in either run "
          f"({noise_text})")
    for d, name, va, vb in diffs[: args.worst]:
        print(f"{d:6.1%}  {name}  {va:.3f}  {vb:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
