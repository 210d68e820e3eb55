#!/usr/bin/python3
"""The PyTorch peer: scan_stack in PyTorch, measured the way remat-bench measures.

    y_0 = x;  y_{i+1} = relu(y_i @ W[i]);  loss = sum(y_L ** 2);  d loss / d W

Modes, as a PyTorch user writes them:
  plain                  no checkpointing (stores everything)
  checkpoint             torch.utils.checkpoint.checkpoint(layer, use_reentrant=False) per layer
                         (JAX's checkpointed scan body)
  checkpoint_sequential  torch.utils.checkpoint.checkpoint_sequential, round(sqrt(L)) segments

For each configuration it reports the median wall time of value_and_grad over
repeats, the bytes PyTorch saves for backward (counted with
torch.autograd.graph.saved_tensors_hooks, shared storage once), and the thread
setting it ran with: it first times every (intra-op threads, OpenBLAS threads)
pair on this machine and keeps the fastest, saying which.

With --check DIR (a `remat run --problem scan_stack --dump DIR`), it loads
DIR/weights.npy and DIR/x.npy, and compares PyTorch's gradient with
DIR/grad_weights.npy.

Output: JSON on stdout, {"peer": "pytorch", "version": ..., "threads": ..., "rows": [...]}.
Exit 3 (and a message) when torch is not installed: the peer is optional.

Usage:
  tools/peer_pytorch.py --config L=32,d=512,N=256 [--config ...] [--repeats 5] [--check DIR]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time


def parse_config(text):
    values = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key not in ("L", "d", "N") or not value.isdigit():
            raise SystemExit(f"peer_pytorch: bad --config '{text}' (expected L=..,d=..,N=..)")
        values[key] = int(value)
    if set(values) != {"L", "d", "N"}:
        raise SystemExit(f"peer_pytorch: --config '{text}' needs L, d and N")
    return values


def inputs(torch, cfg, seed=1):
    # Not remat-bench's generator: the same distribution (He-uniform weights,
    # x uniform in [-1, 1)); --check feeds remat-bench's own inputs instead.
    g = torch.Generator().manual_seed(seed)
    bound = math.sqrt(6.0 / cfg["d"])
    weights = (torch.rand(cfg["L"], cfg["d"], cfg["d"], generator=g) * 2 - 1) * bound
    x = torch.rand(cfg["N"], cfg["d"], generator=g) * 2 - 1
    return weights, x


def value_and_grad(torch, weights, x, mode):
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    w = weights.detach().requires_grad_(True)
    # unbind once: indexing w[i] per layer would make each layer's backward
    # materialize a gradient of all of w (select_backward), O(L^2 d^2).
    ws = w.unbind(0)
    layers = [lambda y, wi=wi: torch.relu(y @ wi) for wi in ws]
    saved = {}

    def pack(t):
        storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = x
        if mode == "plain":
            for layer in layers:
                y = layer(y)
        elif mode == "checkpoint":
            for layer in layers:
                y = checkpoint(layer, y, use_reentrant=False)
        elif mode == "checkpoint_sequential":
            # torch 1.13's checkpoint_sequential is reentrant only: if its
            # input needs no gradient, the weights of every segment but the
            # last silently get none (a documented pitfall). x then must
            # require grad, which costs the first layer's dx matmul.
            segments = max(1, round(math.sqrt(len(layers))))
            modules = [Layer(torch, ws, i) for i in range(len(layers))]
            y = checkpoint_sequential(torch.nn.Sequential(*modules), segments,
                                      y.detach().requires_grad_(True))
        else:
            raise SystemExit(f"peer_pytorch: unknown mode {mode}")
        loss = (y * y).sum()
    loss.backward()
    # Arguments (weights, x) are not residuals, as in remat-bench's listing.
    arguments = {w.data_ptr(), x.data_ptr()} | {wi.data_ptr() for wi in ws}
    residual = sum(n for ptr, n in saved.items() if ptr not in arguments)
    return loss.item(), w.grad, residual


def Layer(torch, w, i):
    class _Layer(torch.nn.Module):
        def forward(self, y):
            return torch.relu(y @ w[i])

    return _Layer()


def time_mode(torch, cfg, mode, repeats, weights=None, x=None):
    if weights is None:
        weights, x = inputs(torch, cfg)
    value_and_grad(torch, weights, x, mode)  # warm-up
    times = []
    residual = 0
    for _ in range(repeats):
        start = time.perf_counter()
        _, _, residual = value_and_grad(torch, weights, x, mode)
        times.append(time.perf_counter() - start)
    return statistics.median(times), residual


def child(args):
    import torch

    torch.set_num_threads(args.intra)
    cfg = parse_config(args.config[0])
    seconds, _ = time_mode(torch, cfg, "plain", args.repeats)
    print(json.dumps({"seconds": seconds}))


def pick_threads(script, configs):
    """Times plain mode under each thread setting in a fresh process (OpenBLAS
    reads its thread count at start-up) and returns the fastest."""
    cores = os.cpu_count() or 1
    choices = sorted({1, min(2, cores)})
    results = []
    for intra in choices:
        for blas in choices:
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas), OMP_NUM_THREADS=str(intra))
            out = subprocess.run(
                [sys.executable, script, "--child", "--intra", str(intra), "--repeats", "3",
                 "--config", configs[0]],
                env=env, capture_output=True, text=True, check=True)
            seconds = json.loads(out.stdout)["seconds"]
            results.append({"intra_op_threads": intra, "openblas_threads": blas,
                            "seconds": seconds})
    best = min(results, key=lambda r: r["seconds"])
    return best, results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--modes", default="plain,checkpoint,checkpoint_sequential")
    parser.add_argument("--check", help="a `remat run --dump` directory of scan_stack")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--intra", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--threads", help="INTRA,OPENBLAS: skip the search")
    args = parser.parse_args()
    if not args.config and not args.check:
        args.config = ["L=32,d=512,N=256"]
    try:
        import torch  # noqa: F401
    except ImportError:
        print("peer_pytorch: torch is not installed (Debian: python3-torch); no peer rows",
              file=sys.stderr)
        return 3
    if args.child:
        child(args)
        return 0

    script = os.path.abspath(__file__)
    if args.threads:
        intra, blas = (int(v) for v in args.threads.split(","))
        best, tried = {"intra_op_threads": intra, "openblas_threads": blas}, []
    else:
        # A short probe: the first configuration cut to 8 layers.
        probe = parse_config(args.config[0]) if args.config else {"L": 8, "d": 512, "N": 256}
        best, tried = pick_threads(
            script, [f"L={min(probe['L'], 8)},d={probe['d']},N={probe['N']}"])
    if os.environ.get("OPENBLAS_NUM_THREADS") != str(best["openblas_threads"]):
        # Re-run under the chosen setting: OpenBLAS fixes its threads at load.
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(best["openblas_threads"]),
                   OMP_NUM_THREADS=str(best["intra_op_threads"]))
        argv = [sys.executable, script, "--threads",
                f"{best['intra_op_threads']},{best['openblas_threads']}",
                "--repeats", str(args.repeats), "--modes", args.modes]
        for c in args.config:
            argv += ["--config", c]
        if args.check:
            argv += ["--check", args.check]
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            return out.returncode
        report = json.loads(out.stdout)
        report["threads_tried"] = tried
        print(json.dumps(report, indent=2))
        return 0

    import torch

    torch.set_num_threads(best["intra_op_threads"])
    report = {"peer": "pytorch", "version": torch.__version__, "threads": best, "rows": []}
    if args.check:
        import numpy as np

        weights = torch.from_numpy(np.load(os.path.join(args.check, "weights.npy")))
        x = torch.from_numpy(np.load(os.path.join(args.check, "x.npy")))
        expected = np.load(os.path.join(args.check, "grad_weights.npy"))
        _, grad, _ = value_and_grad(torch, weights, x, "plain")
        err = float(np.max(np.abs(grad.numpy() - expected)))
        scale = float(np.max(np.abs(expected)))
        report["check"] = {"max_abs_error": err, "max_abs_gradient": scale,
                           "relative": err / scale if scale else err}
    for text in args.config:
        cfg = parse_config(text)
        weights, x = inputs(torch, cfg)
        _, plain_grad, _ = value_and_grad(torch, weights, x, "plain")
        for mode in args.modes.split(","):
            # Every mode must compute plain's gradient, or its time means nothing.
            _, grad, _ = value_and_grad(torch, weights, x, mode)
            if not torch.allclose(grad, plain_grad, rtol=1e-4, atol=1e-5):
                raise SystemExit(f"peer_pytorch: {mode}'s gradient differs from plain's")
            seconds, residual = time_mode(torch, cfg, mode, args.repeats)
            report["rows"].append({
                "name": f"peer/pytorch/scan_stack/L={cfg['L']},d={cfg['d']},N={cfg['N']}/{mode}",
                "problem": "scan_stack", "params": cfg, "engine": "pytorch", "policy": mode,
                "real_time_ms": seconds * 1e3, "residual_bytes": residual,
                "flops": 3 * cfg["L"] * 2 * cfg["N"] * cfg["d"] * cfg["d"],
            })
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
