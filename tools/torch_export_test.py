"""tools/torch_export.py: PyTorch models exported and run by remat agree with PyTorch.

For an MLP, a stack of transformer blocks (nn.Linear, nn.LayerNorm,
nn.GELU(approximate='tanh'), softmax) and a model with checkpointed blocks:
remat's loss and gradients (`remat run --program ... --dump`) equal PyTorch
autograd's, and remat's residual bytes are compared with the bytes PyTorch
saves for backward (torch.autograd.graph.saved_tensors_hooks, each storage
once, inputs and parameters excluded as remat excludes arguments), with no
checkpointing and with full checkpointing; each difference is asserted
exactly and explained where it is.

Tolerance: both sides compute in float32 with different kernels, so each
tensor's error is bounded as the suite bounds an f32 engine against the
oracle (harness/conformance.h: 4 * K * 2^-24 * max|ref|), twice (two f32
computations), with K = 64 roundings for these small models:
max|remat - torch| <= 2 * 4 * 64 * 2^-24 * max|torch| (about 3e-5 relative).

Runs on PyTorch 2 from the workspace's environment (tools/python_env.sh;
$REMAT_VENV names another) when it has one, else on Debian's 1.13
(/usr/bin/python3); where the two differ in what they save, the assertions
say which. Needs PyTorch; skipped, and passed,
without it.
"""

import functools
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL = 2 * 4 * 64 * 2.0 ** -24

# Every tempfile.mkdtemp() of the exporter's tests and of the scripts that
# use their helpers (tools/examples/model_table.py) goes under one folder,
# removed when the process exits: an exported model and its dumps are up
# to a GiB (VGG-11's classifier), and a full run made thousands of them.
_SCRATCH = tempfile.TemporaryDirectory(prefix="remat-export-")
tempfile.tempdir = _SCRATCH.name

try:
    import numpy as np
    import torch
    if torch.__version__.startswith("1."):
        raise ImportError("PyTorch %s: the exporter traces with PyTorch 2's dispatch modes" % torch.__version__)
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential
    sys.path.insert(0, HERE)
    from torch_export import ExportError, export
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def _pythons():
    """Where PyTorch may be, best first: the workspace's environment
    (tools/python_env.sh: PyTorch 2; $REMAT_VENV names another), then
    Debian's python (PyTorch 1.13)."""
    venv = os.environ.get("REMAT_VENV") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.realpath(__file__))), ".venv")
    return [os.path.join(venv, "bin", "python"), "/usr/bin/python3"]


def _reexec_with_torch():
    """Bazel's python may lack torch: run on the first python that has it.
    The environment's PyTorch 2 comes before Debian's 1.13 even when this
    python has one."""
    if os.environ.get("REMAT_TORCH_REEXEC"):  # chosen already: never twice
        return
    for py in _pythons():
        if os.path.abspath(sys.executable) == os.path.abspath(py) and HAVE_TORCH:
            return
        if not os.path.exists(py):
            continue
        if subprocess.run([py, "-c", "import torch, numpy; assert not torch.__version__.startswith('1.')"],
                          capture_output=True).returncode == 0:
            os.environ["REMAT_TORCH_REEXEC"] = py
            os.execv(py, [py] + sys.argv)


if HAVE_TORCH:
    class MLP(nn.Module):
        def __init__(self, checkpointed=False):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
            self.checkpointed = checkpointed

        def forward(self, x):
            y = checkpoint(self.net, x, use_reentrant=False) if self.checkpointed else self.net(x)
            return (y * y).sum()

    class Block(nn.Module):
        """A post-LN transformer block, one head: attention, then an FFN with GELU(tanh)."""

        def __init__(self, d, f):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ffn = nn.Sequential(nn.Linear(d, f), nn.GELU(approximate="tanh"), nn.Linear(f, d))
            self.scale = d ** -0.5

        def forward(self, x):
            scores = self.q(x) @ self.k(x).transpose(-2, -1) * self.scale
            a = torch.softmax(scores, dim=-1) @ self.v(x)
            h = self.ln1(x + self.o(a))
            return self.ln2(h + self.ffn(h))

    class Transformer(nn.Module):
        def __init__(self, layers=2, d=16, f=32, checkpointed=False):
            super().__init__()
            self.blocks = nn.ModuleList(Block(d, f) for _ in range(layers))
            # A head after the last LayerNorm: sum(LN(.)^2) alone is nearly
            # constant, its gradients all cancellation.
            self.head = nn.Linear(d, d)
            self.checkpointed = checkpointed

        def forward(self, x):
            for b in self.blocks:
                x = checkpoint(b, x, use_reentrant=False) if self.checkpointed else b(x)
            y = self.head(x)
            return (y * y).sum()

    class Sequential(nn.Module):
        """checkpoint_sequential over 4 Linear+ReLU blocks in 2 segments."""

        def __init__(self, segments):
            super().__init__()
            self.seq = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(4)])
            self.segments = segments

        def forward(self, x):
            return checkpoint_sequential(self.seq, self.segments, x).sum()

    class BasicBlock(nn.Module):
        """torchvision's BasicBlock, as torchvision writes it."""
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x
            out = self.conv1(x)
            out = self.bn1(out)
            out = self.relu(out)
            out = self.conv2(out)
            out = self.bn2(out)
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            out = self.relu(out)
            return out

    class ResNet(nn.Module):
        """torchvision's ResNet with BasicBlocks (layers [2, 2, 2, 2] is
        ResNet-18), narrower; each block under torch.utils.checkpoint when
        `checkpointed`, the loss F.cross_entropy on integer targets."""

        def __init__(self, layers=(1, 1), width=4, num_classes=5, checkpointed=False):
            super().__init__()
            self.inplanes = width
            self.checkpointed = checkpointed
            self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            stages = []
            for i, blocks in enumerate(layers):
                stages.append(self._make_layer(width * 2 ** i, blocks, stride=1 if i == 0 else 2))
            self.layers = nn.ModuleList(stages)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(width * 2 ** (len(layers) - 1), num_classes)

        def _make_layer(self, planes, blocks, stride):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            for _ in range(1, blocks):
                layers.append(BasicBlock(self.inplanes, planes))
            return nn.Sequential(*layers)

        def forward(self, x, targets):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            for stage in self.layers:
                for block in stage:
                    x = checkpoint(block, x) if self.checkpointed else block(x)
            x = torch.flatten(self.avgpool(x), 1)
            return F.cross_entropy(self.fc(x), targets)

    # Names the random trees below draw from, for modules and tensors alike,
    # so that the same last name recurs at every depth.
    _NAMES = ["shift", "w", "block", "inner", "b"]

    class Nest(nn.Module):
        """A random tree of modules with repeated names: each node owns a
        weight and a buffer under names drawn from _NAMES (a child may be
        called "shift" as its parent's buffer is), reads both directly in
        forward (x @ w, + buffer), may reuse (tie) an ancestor's weight, and
        calls its children in order, some under checkpoint."""

        def __init__(self, rng, d, depth, ancestors=()):
            super().__init__()
            names = list(rng.permutation(_NAMES))
            self.w_name, self.buf_name = names[0], names[1]
            if ancestors and rng.random() < 0.25:
                w = ancestors[int(rng.integers(len(ancestors)))]  # tied
            else:
                w = nn.Parameter(torch.tensor(rng.normal(0, 0.5, (d, d)), dtype=torch.float32))
            self.register_parameter(self.w_name, w)
            self.register_buffer(self.buf_name, torch.tensor(rng.normal(0, 10.0, (d,)), dtype=torch.float32))
            self.kids = []
            for name in names[2:2 + int(rng.integers(0, 3 if depth < 3 else 1))]:
                self.add_module(name, Nest(rng, d, depth + 1, ancestors + (w,)))
                self.kids.append((name, bool(rng.random() < 0.4)))

        def forward(self, x):
            y = torch.relu(x @ getattr(self, self.w_name)) + getattr(self, self.buf_name)
            for name, checkpointed in self.kids:
                kid = getattr(self, name)
                y = checkpoint(kid, y, use_reentrant=False) if checkpointed else kid(y)
            return y


def torch_saved_bytes(model, x):
    """Bytes PyTorch keeps for backward: saved_tensors_hooks' tensors, each
    storage once, the input and parameters excluded; and the loss and grads."""
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        loss = model(x)
    args = {p.storage().data_ptr() for p in model.parameters()} | {x.storage().data_ptr()}
    seen = set()
    for t in saved:
        p = t.storage().data_ptr()
        if p not in args:
            seen.add((p, t.storage().nbytes()))
    loss.backward()
    return sum(n for _, n in seen), loss


@unittest.skipIf(not HAVE_TORCH, "PyTorch 2 is not installed: tools/torch_export.py is not tested")
class TorchExportTest(unittest.TestCase):

    def remat(self, *args):
        r = subprocess.run([os.path.join(HERE, "remat")] + list(args), capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="passive"))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def run_remat(self, model, x, policy=None, **options):
        """Exports (export's options), runs remat (recompute engine), returns
        (loss, grads by name, residual bytes)."""
        d = tempfile.mkdtemp()
        export(model, (x,), d, **options)
        out = tempfile.mkdtemp()
        args = ["run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--wrt", "all",
                "--engine", "recompute", "--dump", out]
        if policy:
            args += ["--policy", policy]
        self.remat(*args)
        import json
        with open(os.path.join(out, "stats.json")) as f:
            residual = json.load(f)["residual_bytes"]
        grads = {f[5:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.startswith("grad_")}
        return float(np.load(os.path.join(out, "loss.npy"))), grads, residual

    def check(self, model, x, policy=None, params_only=False, **options):
        """params_only: compare the gradients of parameters and x, not the
        number of gradients (buffers are differentiated by --wrt all too)."""
        torch.manual_seed(0)
        model.zero_grad()
        xr = x.clone().requires_grad_(True)
        torch_bytes, loss = torch_saved_bytes(model, xr)
        r_loss, r_grads, r_bytes = self.run_remat(model, x, policy, **options)
        self.assertLessEqual(abs(r_loss - loss.item()), RTOL * max(abs(loss.item()), 1e-30) * 4,
                             "loss: remat %r, PyTorch %r" % (r_loss, loss.item()))
        expected = {n: p.grad.numpy() for n, p in model.named_parameters()}
        expected["x"] = xr.grad.numpy()
        if not params_only:
            self.assertEqual(len(r_grads), len(expected), sorted(r_grads))
        largest = max(np.max(np.abs(g)) for g in expected.values())
        for name, ref in expected.items():
            got = r_grads.get(name)
            if got is None:
                got = r_grads[name + ".T"].T  # nn.Linear's weight, exported transposed
            if name.endswith(".k.bias"):
                # Softmax is invariant to adding q.b_k to a row of scores: the
                # key bias's gradient is 0 in exact arithmetic, rounding noise
                # on both sides, small next to the model's gradients.
                self.assertLessEqual(np.max(np.abs(got)), RTOL * largest, name)
                self.assertLessEqual(np.max(np.abs(ref)), RTOL * largest, name)
                continue
            err = np.max(np.abs(got - ref))
            self.assertLessEqual(err, RTOL * np.max(np.abs(ref)), name)
        return r_bytes, torch_bytes

    def test_mlp(self):
        torch.manual_seed(1)
        x = torch.randn(8, 16)
        m = MLP()
        r, t = self.check(m, x)
        # PyTorch's relu saves its output, which is also the next Linear's
        # input (one storage); remat's relu saves its input too (the mask's
        # source) and its matmul its own input: one (8, 32) f32 value more.
        self.assertEqual(t, 8 * 32 * 4 + 8 * 8 * 4)
        self.assertEqual(r, t + 8 * 32 * 4)
        # Full checkpointing: the network in one region, whose input is x (an
        # argument); both keep only y for y*y.
        m.checkpointed = True
        r, t = self.check(m, x)
        self.assertEqual(t, 8 * 8 * 4)
        self.assertEqual(r, t)
        # remat's --policy nothing_saveable sets the region's policy: the same.
        r, t = self.check(m, x, policy="nothing_saveable")
        self.assertEqual(r, t)

    def test_transformer_stack(self):
        torch.manual_seed(2)
        x = torch.randn(8, 16)
        m = Transformer()
        r, t = self.check(m, x)
        print("transformer, no checkpointing: remat %d B, PyTorch %d B" % (r, t))
        # The same values, but per block PyTorch also saves each LayerNorm's
        # mean and 1/std (2 LayerNorms x 2 x 8 rows x 4 B; remat's layer_norm
        # backward recomputes them from its saved input) and the Python scalar
        # of `* self.scale` as a 0-d float64 tensor (8 B; remat's scale keeps
        # its constant in the op).
        # (PyTorch 2 saves no tensor for a multiplication by a Python number.)
        scalar = 8 if torch.__version__.startswith("1.") else 0
        self.assertEqual(t, r + 2 * (2 * 2 * 8 * 4 + scalar))
        m.checkpointed = True
        r2, t2 = self.check(m, x)
        print("transformer, every block checkpointed: remat %d B, PyTorch %d B" % (r2, t2))
        # Each checkpointed block keeps only its input (block 0's is x, an
        # argument); the head keeps its input and y for y*y: 3 (8, 16) values
        # in remat. PyTorch 2's non-reentrant checkpoint saves a block's
        # input through saved_tensors_hooks: the same 3. 1.13's holds block
        # 1's input in its closure, out of the hooks' sight: they see 2.
        v = 8 * 16 * 4
        self.assertEqual(r2, 3 * v)
        self.assertEqual(t2, (2 if torch.__version__.startswith("1.") else 3) * v)

    def test_checkpointed_blocks(self):
        torch.manual_seed(3)
        x = torch.randn(8, 16)
        r, t = self.check(Sequential(segments=2), x)
        # torch 1.13's checkpoint_sequential checkpoints segment 0 (blocks
        # 0-1) and runs the last segment (blocks 2-3) inline, and so does the
        # exported program. Both keep segment 0's output (block 2's matmul
        # input) and block 2's relu output (block 3's matmul input). PyTorch's
        # relu saves its output, so it also keeps block 3's relu output, which
        # sum's backward does not need; remat's relu saves its input (the
        # bias_add outputs of blocks 2 and 3).
        v = 8 * 16 * 4
        self.assertEqual(t, 3 * v)
        self.assertEqual(r, 4 * v)

    def test_nested_modules_with_repeated_names_keep_their_paths(self):
        # A differential test: random trees of modules whose parameters and
        # buffers share last names at every depth ("shift" of the root and
        # of "block.inner"), some tied, some under checkpoint. remat's loss
        # and gradients on the export must be PyTorch's: a tensor exported
        # under another module's path, or two tensors merged into one input,
        # changes the loss (buffers are drawn at scale 10 so that it does).
        # The repro that found the bug: a block with its own `shift` buffer
        # (1.0) inside a module with a `shift` buffer (100.0).
        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("shift", torch.ones(4))
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x) + self.shift

        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("shift", torch.full((4,), 100.0))
                self.block = Inner()

            def forward(self, x):
                return ((self.block(x) + self.shift) ** 2).sum()

        torch.manual_seed(5)
        m = Outer()
        text = export(m, (torch.randn(3, 4),), tempfile.mkdtemp())
        self.assertIn("block.shift: f32[4]", text)
        self.assertIn("shift: f32[4]", text.replace("block.shift", ""))
        self.check(m, torch.randn(3, 4), params_only=True)

        rng = np.random.default_rng(6)
        for trial in range(12):
            d = 4
            m = Nest(rng, d, 0)
            x = torch.tensor(rng.normal(0, 1, (3, d)), dtype=torch.float32)

            class Loss(nn.Module):
                def __init__(self, inner):
                    super().__init__()
                    self.m = inner

                def forward(self, x):
                    y = self.m(x)
                    return (y * y).sum()

            with self.subTest(trial=trial, tree=str(m)):
                self.check(Loss(m), x, params_only=True)

    def test_sub_neg_exp_log(self):
        class Elementwise(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 16)

            def forward(self, x):
                y = self.fc(x)
                z = torch.exp(-y) - torch.log(torch.exp(y) + torch.exp(-y))
                return (z * z).sum()

        torch.manual_seed(7)
        m = Elementwise()
        text = export(m, (torch.randn(4, 16),), tempfile.mkdtemp())
        for op in ("neg(", "exp(", "log(", "sub("):
            self.assertIn(op, text)
        self.check(m, torch.randn(4, 16))

    def test_resnet_with_batch_norm_state(self):
        # A torchvision-style ResNet in training mode, blocks checkpointed:
        # remat's loss and gradients are PyTorch autograd's, and the new
        # running statistics remat returns as state (state_<buffer>.npy) are
        # those one forward pass of PyTorch leaves in the buffers, though
        # remat recomputes every block (PyTorch's reentrant checkpoint
        # updates them again when it recomputes: pytorch#96136).
        torch.manual_seed(5)
        model = ResNet(layers=(2, 1), width=4, num_classes=5, checkpointed=True).train()
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):  # away from 1 and 0, so the updates show
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 1.5)
        x = torch.randn(3, 3, 32, 32)
        targets = torch.tensor([1, 4, 0])
        buffers_before = {n: b.numpy().copy() for n, b in model.named_buffers()}
        d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        text = export(model, (x, targets), d)
        self.assertIn("targets: i32[3]", text)
        self.assertEqual(text.count(" = state("), 2 * 8, "two state ops per batch norm (8 of them)")
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--wrt", "all",
                   "--engine", "recompute", "--dump", out)
        # PyTorch: one forward pass for the new buffers, then the gradients.
        reference = ResNet(layers=(2, 1), width=4, num_classes=5).train()
        reference.load_state_dict(model.state_dict())
        loss = reference(x, targets)
        new_state = {n: b.detach().numpy().copy() for n, b in reference.named_buffers()
                     if "running" in n}
        loss.backward()
        r_loss = float(np.load(os.path.join(out, "loss.npy")))
        self.assertLessEqual(abs(r_loss - loss.item()), RTOL * abs(loss.item()) * 4)
        for name, p in reference.named_parameters():
            path = os.path.join(out, "grad_%s.npy" % name)
            got = np.load(path) if os.path.exists(path) else np.load(os.path.join(out, "grad_%s.T.npy" % name)).T
            ref = p.grad.numpy()
            self.assertLessEqual(np.max(np.abs(got - ref)), RTOL * 4 * np.max(np.abs(ref)), name)
        self.assertEqual(len(new_state), 16)
        for name, ref in new_state.items():
            got = np.load(os.path.join(out, "state_%s.npy" % name))
            before = model.state_dict()[name].numpy()
            self.assertGreater(np.max(np.abs(ref - before)), 1e-3, "%s: the update shows" % name)
            self.assertLessEqual(np.max(np.abs(got - ref)), RTOL * 4 * np.max(np.abs(ref)), name)
        # The export left the model as it was (its forward passes to find
        # shapes ran with the buffers restored).
        for name, b in model.named_buffers():
            self.assertTrue(np.array_equal(b.numpy(), buffers_before[name]), name)

    def test_embedding_erf_gelu_and_dropout(self):
        # A token model: nn.Embedding on integer ids, nn.GELU() (erf), dropout,
        # log_softmax. In eval mode (dropout the identity) remat's loss and
        # gradients are PyTorch's; in training mode the export has one
        # dropout op per nn.Dropout on the program's dropout_seed input, and
        # remat's eager and recompute agree bit for bit (the contract's mask,
        # redrawn on recomputation), while the loss moves away from eval's.
        class Tokens(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(11, 8)
                self.fc = nn.Linear(8, 8)
                self.act = nn.GELU()
                self.drop = nn.Dropout(0.25)

            def forward(self, ids):
                h = self.drop(self.act(self.fc(self.wte(ids))))
                return -torch.nn.functional.log_softmax(h, dim=-1).sum()

        torch.manual_seed(6)
        m = Tokens()
        ids = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
        m.eval()
        d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        text = export(m, (ids,), d)
        self.assertIn("gelu_erf(", text)
        self.assertNotIn("dropout(", text)
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--dump", out)
        loss = m(ids)
        loss.backward()
        self.assertLessEqual(abs(float(np.load(os.path.join(out, "loss.npy"))) - loss.item()),
                             RTOL * 4 * abs(loss.item()))
        for name, p in m.named_parameters():
            path = os.path.join(out, "grad_%s.npy" % name)
            got = np.load(path) if os.path.exists(path) else np.load(os.path.join(out, "grad_%s.T.npy" % name)).T
            self.assertLessEqual(np.max(np.abs(got - p.grad.numpy())), RTOL * 4 * np.max(np.abs(p.grad.numpy())), name)
        m.train()
        d2 = tempfile.mkdtemp()
        text = export(m, (ids,), d2)
        self.assertEqual(text.count(" = dropout("), 1)
        self.assertIn("dropout_seed: i32[]", text)
        runs = []
        for engine in ("eager", "recompute"):
            o = tempfile.mkdtemp()
            self.remat("run", "--program", os.path.join(d2, "program.txt"), "--inputs", d2, "--engine",
                       engine, "--policy", "nothing_saveable", "--dump", o)
            runs.append({f: np.load(os.path.join(o, f)) for f in os.listdir(o) if f.endswith(".npy")})
        for f, a in runs[0].items():
            self.assertEqual(a.tobytes(), runs[1][f].tobytes(), f)
        self.assertNotEqual(float(runs[0]["loss.npy"]), float(np.load(os.path.join(out, "loss.npy"))))

    def grads_match(self, out, model, scale=4):
        """remat's gradients (grad_<path>.npy, or grad_<path>.T.npy for an
        nn.Linear weight written transposed) equal model's .grad within the
        float32 tolerance; returns the largest error relative to its max."""
        worst = 0.0
        for name, p in model.named_parameters():
            path = os.path.join(out, "grad_%s.npy" % name)
            got = np.load(path) if os.path.exists(path) else np.load(os.path.join(out, "grad_%s.T.npy" % name)).T
            ref = p.grad.numpy()
            err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
            self.assertLessEqual(err, RTOL * scale, name)
            worst = max(worst, err)
        return worst

    def test_nanogpt_as_its_authors_write_it(self):
        # tools/testdata/nanogpt.py: nanoGPT's model, unchanged in what the
        # exporter meets (qkv split, view/transpose heads, SDPA with
        # is_causal or a registered mask with masked_fill, tied embedding,
        # cross_entropy with ignore_index=-1 on targets.view(-1), the model
        # returning (logits, loss)). remat's loss and gradients are PyTorch's.
        sys.path.insert(0, os.path.join(HERE, "testdata"))
        from nanogpt import GPT, GPTConfig
        flash = [True, False] if hasattr(F, "scaled_dot_product_attention") else [False]
        for use_flash in flash:
            for checkpointed in (False, True):
                with self.subTest(flash=use_flash, checkpointed=checkpointed):
                    torch.manual_seed(8)
                    cfg = GPTConfig(flash=use_flash, checkpointed=checkpointed)
                    model = GPT(cfg)
                    idx = torch.randint(0, cfg.vocab_size, (2, 16))
                    targets = torch.randint(0, cfg.vocab_size, (2, 16))
                    d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
                    text = export(model, (idx, targets), d)
                    self.assertIn("targets: i32[32] data", text)  # targets.view(-1), declared so
                    self.assertIn("idx: i32[2,16] data", text)
                    self.assertIn("transformer.wte.weight: f32[96,32]", text)  # tied: one input
                    self.assertNotIn("lm_head", text.split("{")[0])
                    self.assertEqual(text.count("checkpoint("), 2 if checkpointed else 0)
                    self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d,
                               "--engine", "recompute", "--dump", out)
                    model.zero_grad()
                    _, loss = model(idx, targets)
                    loss.backward()
                    # Without --wrt: the parameters' gradients, nothing else.
                    params = {n + ("" if os.path.exists(os.path.join(out, "grad_%s.npy" % n)) else ".T")
                              for n, _ in model.named_parameters()}
                    self.assertEqual({f[5:-4] for f in os.listdir(out) if f.startswith("grad_")}, params)
                    r_loss = float(np.load(os.path.join(out, "loss.npy")))
                    self.assertLessEqual(abs(r_loss - loss.item()), RTOL * 4 * abs(loss.item()))
                    self.grads_match(out, model)

    def test_nanogpt_dropout_is_one_mask_in_every_engine(self):
        # With dropout > 0 in training mode: one dropout op per nn.Dropout
        # and per SDPA dropout_p, on the contract's mask; remat's eager and
        # recompute engines (every block recomputed) agree bit for bit.
        sys.path.insert(0, os.path.join(HERE, "testdata"))
        from nanogpt import GPT, GPTConfig
        torch.manual_seed(9)
        cfg = GPTConfig(dropout=0.1, checkpointed=True, flash=hasattr(F, "scaled_dot_product_attention"))
        model = GPT(cfg).train()
        idx = torch.randint(0, cfg.vocab_size, (2, 16))
        d = tempfile.mkdtemp()
        text = export(model, (idx, torch.randint(0, cfg.vocab_size, (2, 16))), d)
        self.assertEqual(text.count(" = dropout("), 1 + 3 * cfg.n_layer)
        runs = []
        for engine in ("eager", "recompute"):
            o = tempfile.mkdtemp()
            self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--engine", engine,
                       "--dump", o)
            runs.append({f: np.load(os.path.join(o, f)) for f in os.listdir(o) if f.endswith(".npy")})
        self.assertGreater(len(runs[0]), 20)
        for f, a in runs[0].items():
            self.assertEqual(a.tobytes(), runs[1][f].tobytes(), f)

    def test_torchvision_resnet18(self):
        # torchvision's own resnet18, in training mode, its logits into
        # F.cross_entropy (export's loss=): loss, gradients and the new
        # BatchNorm running statistics are PyTorch's.
        try:
            import torchvision
        except ImportError:
            self.skipTest("torchvision is not installed (tools/python_env.sh installs it with PyTorch 2)")
        torch.manual_seed(10)
        model = torchvision.models.resnet18(num_classes=10).train()
        x, targets = torch.randn(2, 3, 64, 64), torch.tensor([3, 7])
        d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        text = export(model, (x,), d, loss=F.cross_entropy, loss_inputs=(targets,))
        self.assertIn("program ResNet(conv1.weight: f32[64,3,7,7]", text)
        self.assertIn("targets: i32[2] data", text)
        self.assertIn("x: f32[2,3,64,64] data", text)
        self.assertIn("bn1.running_mean: f32[64] data", text)
        self.assertEqual(text.count(" = state("), 2 * 20)
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--engine", "recompute",
                   "--dump", out)
        self.resnet18_matches(model, x, targets, out)

    def resnet18_matches(self, model, x, targets, out):
        """remat's loss, gradients and 40 new running statistics in `out`
        (--dump) are those of torchvision's resnet18 with model's state, run
        by PyTorch on x and targets without checkpointing (PyTorch's
        reentrant checkpoint updates the statistics again when it
        recomputes)."""
        import torchvision
        reference = torchvision.models.resnet18(num_classes=10).train()
        reference.load_state_dict(model.state_dict())
        loss = F.cross_entropy(reference(x), targets)
        loss.backward()
        self.assertLessEqual(abs(float(np.load(os.path.join(out, "loss.npy"))) - loss.item()),
                             RTOL * 4 * abs(loss.item()))
        self.grads_match(out, reference)
        stats = [(n, b) for n, b in reference.named_buffers() if "running" in n]
        self.assertEqual(len(stats), 40)
        for name, b in stats:
            got = np.load(os.path.join(out, "state_%s.npy" % name))
            self.assertLessEqual(np.max(np.abs(got - b.numpy())), RTOL * 4 * np.max(np.abs(b.numpy())), name)

    def test_checkpoint_of_functions_and_its_keyword_arguments(self):
        # checkpoint of a method, a closure, a lambda, a module's forward and
        # a torch.nn module, with PyTorch 2's keyword arguments: each is a
        # region named by the function (or the module's path); remat's
        # gradients are PyTorch's. A context_fn (selective checkpointing) is
        # refused by name.
        if torch.__version__.startswith("1."):
            self.skipTest("PyTorch 1.13's checkpoint has no determinism_check (it passes it to the function)")

        class Functions(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

            def pair(self, x):
                return self.b(torch.relu(self.a(x)))

            def forward(self, x):
                def custom(y):
                    return torch.relu(self.c(y))
                x = checkpoint(self.pair, x, use_reentrant=False, preserve_rng_state=False)
                x = checkpoint(custom, x, use_reentrant=False, determinism_check="none")
                x = checkpoint(lambda y: self.a(y), x, use_reentrant=True)
                x = checkpoint(self.b.forward, x, use_reentrant=False)
                x = checkpoint(self.c, x, use_reentrant=False, debug=False)
                return x

        torch.manual_seed(11)
        m = Functions()
        text = export(m, (torch.randn(4, 8),), tempfile.mkdtemp(), loss="sum_of_squares")
        for name in ("pair", "custom", "lambda", "b", "c"):
            self.assertIn('name="%s" policy="nothing_saveable"' % name, text)

        class Loss(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return (self.inner(x) ** 2).sum()

        self.check(Loss(m), torch.randn(4, 8), params_only=True)

        class Selective(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return checkpoint(self.fc, x, use_reentrant=False, context_fn=lambda: None).sum()

        with self.assertRaisesRegex(ExportError, r"\n  <root> \(checkpoint\): checkpoint with a context_fn "
                                    r"\(selective checkpointing\) is not exported"):
            export(Selective(), (torch.randn(2, 4),), tempfile.mkdtemp())

    def test_hugging_face_style_partial_checkpoint(self):
        # transformers' gradient_checkpointing_enable() stores
        # functools.partial(checkpoint, use_reentrant=...) on the model and
        # its layers call self._gradient_checkpointing_func(layer.__call__, x):
        # each call is a region, the model untouched after export.
        if torch.__version__.startswith("1."):
            self.skipTest("PyTorch 1.13's checkpoint has no use_reentrant=False for every function")

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return torch.relu(self.fc(x))

        class HfStyle(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Layer() for _ in range(3)])
                self.gradient_checkpointing = False

            def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
                kwargs = gradient_checkpointing_kwargs or {"use_reentrant": True}
                self._gradient_checkpointing_func = functools.partial(checkpoint, **kwargs)
                self.gradient_checkpointing = True

            def forward(self, x):
                for layer in self.layers:
                    if self.gradient_checkpointing and self.training:
                        x = self._gradient_checkpointing_func(layer.__call__, x)
                    else:
                        x = layer(x)
                return (x ** 2).sum()

        torch.manual_seed(5)
        m = HfStyle()
        m.gradient_checkpointing_enable({"use_reentrant": False})
        partial = m._gradient_checkpointing_func
        text = export(m, (torch.randn(4, 8),), tempfile.mkdtemp())
        self.assertEqual(text.count('policy="nothing_saveable"'), 3, text)
        for i in range(3):
            self.assertIn('name="layers.%d"' % i, text)
        self.assertIs(m._gradient_checkpointing_func, partial, "export left the model changed")
        self.check(m, torch.randn(4, 8), params_only=True)

    def test_a_mask_from_the_inputs_is_named(self):
        class DataMask(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x).masked_fill(x > 0, 0.0).sum()

        # The mask is x > 0: the comparison is where it stops, by its ATen op.
        with self.assertRaisesRegex(ExportError, r"\n  <root> \(aten\.gt\.Scalar\): a mask computed from the "
                                    r"model's values"):
            export(DataMask(), (torch.randn(3, 4),), tempfile.mkdtemp())

    def test_every_unsupported_use_in_one_message(self):
        # Every op that reaches the loss and remat cannot take, one line
        # each (module path, ATen op, what), those inside a checkpoint region
        # included; an unsupported op whose value is never used is not one.
        class Many(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 16)
                self.drop = nn.Softshrink()
                self.act = nn.ELU()
                self.block = nn.Sequential(nn.LayerNorm((4, 16)), nn.Hardshrink())
                self.inner = nn.Sequential(nn.Linear(16, 16), nn.CELU())

            def forward(self, x):
                nn.functional.softsign(x)  # dead: not reported
                y = checkpoint(self.inner, self.block(self.act(self.drop(self.fc(x)))), use_reentrant=False)
                return y.sum()

        with self.assertRaises(ExportError) as caught:
            export(Many(), (torch.randn(4, 16),), tempfile.mkdtemp())
        message = str(caught.exception)
        self.assertTrue(message.startswith("5 uses in the model are not supported"), message)
        for line in ("\n  drop (aten.softshrink.default): no mapping to remat's ops",
                     "\n  act (aten.elu.default): no mapping",
                     "\n  block.0 (aten.native_layer_norm.default): layer_norm over (4, 16) (remat's: the last axis)",
                     "\n  block.1 (aten.hardshrink.default): ",
                     "\n  inner.1 (aten.celu.default): no mapping"):
            self.assertIn(line, message)
        self.assertNotIn("softsign", message)

    def test_shapes_are_concrete_and_values_are_an_error_naming_the_module(self):
        # Python on shapes traces (the example's shapes, concrete: `b, t =
        # x.shape`, an assert on them); Python on a tensor's values does not,
        # and the error names the module that holds it, not fx's TraceError.
        class ShapeDependent(nn.Module):
            def forward(self, x):
                b, t = x.shape
                assert t <= 8, "too long"
                return (x * b).sum()

        x = torch.randn(2, 3)
        d, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        text = export(ShapeDependent(), (x,), d)
        self.assertIn("scale(%x) scalar=2.0", text)
        self.remat("run", "--program", os.path.join(d, "program.txt"), "--inputs", d, "--dump", out)
        self.assertAlmostEqual(float(np.load(os.path.join(out, "loss.npy"))), (x * 2).sum().item(), places=5)

        class ValueDependent(nn.Module):
            def forward(self, x):
                return x if x.sum() > 0 else -x

        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.branch = ValueDependent()

            def forward(self, x):
                return self.branch(x).sum()

        with self.assertRaisesRegex(ExportError, r"\n  branch \(aten\._local_scalar_dense\.default\): Python "
                                    r"reads a value of a tensor computed from the model's inputs"):
            export(Outer(), (x,), tempfile.mkdtemp())

    def test_name_clash_is_an_error(self):
        class Clash(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("x", torch.ones(2, 4))

            def forward(self, x):
                return (x + self.x).sum()

        with self.assertRaisesRegex(ExportError, r"both be named 'x'"):
            export(Clash(), (torch.randn(2, 4),), tempfile.mkdtemp())

    def test_unsupported_is_an_error_naming_the_module(self):
        torch.manual_seed(4)
        with self.assertRaisesRegex(ExportError, r"\n  1\.0 \(aten\.softshrink\.default\): no mapping"):
            export(nn.Sequential(nn.Linear(16, 16), nn.Sequential(nn.Softshrink())), (torch.randn(2, 16),),
                   tempfile.mkdtemp(), loss="sum")
        with self.assertRaisesRegex(ExportError, r"\n  0 \(aten\.embedding_renorm\.default\)"):
            export(nn.Sequential(nn.Embedding(8, 4, max_norm=1.0)), (torch.tensor([1, 2]),),
                   tempfile.mkdtemp(), loss="sum")
        with self.assertRaisesRegex(ExportError, "not a scalar"):
            export(nn.Sequential(nn.ReLU()), (torch.randn(2, 16),), tempfile.mkdtemp())


if __name__ == "__main__":
    _reexec_with_torch()
    if not HAVE_TORCH:
        print("SKIPPED: PyTorch 2 is not installed (tools/python_env.sh); tools/torch_export.py is not tested")
    else:
        print("PyTorch %s (%s)" % (torch.__version__, sys.executable))
    unittest.main()
