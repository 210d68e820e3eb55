"""Judges a float32 run of a whole PyTorch model (its loss, every gradient,
every new BatchNorm statistic) against a float64 run of the same model.

The rule. A tensor's error is its largest absolute difference from the
float64 run over the tensor's scale (its largest float64 element; see
Reference.scale for the two exceptions). A run passes when, on every tensor, its
error is at most RATIO times PyTorch's own float32 error there, or RATIO *
FLOOR where PyTorch's is smaller.

Kinks. ReLU-family activations have a derivative that jumps: relu and
leaky_relu at 0, hardtanh and relu6 at their bounds, hardswish and
hardsigmoid at -3 and 3. Where such an activation's float64 input lies
within roundoff of a kink, a float32 run may land on either side; both
sides are right, and every gradient upstream differs by that element's
cotangent times the jump, carried back by the backward pass. (A
torchvision ResNet-18 at batch 4 and 112x112: one element of 32,768 at
8.7e-6 in float64 put remat's AVX-512 gradients 13% from float64, while
on AVX2 PyTorch's own float32 landed on the other side and was 8.9% off.)

So the float64 reference is a set, not one gradient: g64 + sum_e t_e D_e,
t_e in {0, 1}, one D_e per element e near a kink, where D_e is what
flipping e's side changes (the float64 backward of a one-hot cotangent,
e's cotangent times the jump, from the activation's input). The backward
pass is linear in its cotangents, so flips add. PyTorch's float32 run is
judged against the member with its own flips (known: its activations'
inputs are traced). Another run is judged against g64, then the member
with PyTorch's flips, then the member nearest it: the candidate flips
that point most along its residual are found for all at once by a
backward of the backward, and the nearest subset of those is fitted
(least squares, in two searches: Reference.nearest), then single flips
toggled while they lower the verdict's own measure (Reference.refine). A run that is right up to flips at elements within
roundoff of a kink passes, and nothing else is forgiven: a flip the fit
misses makes a run look worse, never better.

"Within roundoff": e's float64 input is closer to a kink than RATIO times
PyTorch's own float32 error on that activation's input tensor (the same
allowance the rule gives a run on its outputs).

Needs PyTorch 2 (torch.overrides.TorchFunctionMode).
"""

import contextlib
import copy
import itertools
from typing import Callable, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

RATIO = 20                # a run's error may be this many times PyTorch's own
BAND = RATIO              # near a kink: within this many times PyTorch's error there
FLOOR = 64 * 2.0 ** -24   # PyTorch's error counts as at least this
GRAD_FLOOR = 1e-4         # a gradient's scale is at least this of the model's largest
EXHAUSTIVE_FLIPS = 12     # up to this many flips that matter, every subset is tried
SAMPLE = 4096             # elements of each gradient the fit looks at
MAX_FITTED = 32           # flips a round of the fit considers: those along the residual first
FIT_ROUNDS = 8            # rounds of the fit, each on the residual the last left
REFINE_ROUNDS = 4         # single flips toggled by the verdict's own measure, after the fit


def _arg(args, kwargs, index, name, default):
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else default


class _Kind(NamedTuple):
    """A kinked activation as the model calls it."""
    pure: Callable   # the out-of-place function, called with the arguments before `inplace`
    inplace_at: int  # where its `inplace` argument is; ALWAYS or NEVER in place
    kinks: Callable  # (args, kwargs) -> its kink points


ALWAYS, NEVER = 0, -1
_AT_0 = (lambda a, k: (0.0,))
_AT_3 = (lambda a, k: (-3.0, 3.0))
_KINKED = {
    F.relu: _Kind(F.relu, 1, _AT_0),
    F.relu_: _Kind(F.relu, ALWAYS, _AT_0),
    torch.relu: _Kind(torch.relu, NEVER, _AT_0),
    torch.relu_: _Kind(torch.relu, ALWAYS, _AT_0),
    torch.Tensor.relu: _Kind(torch.relu, NEVER, _AT_0),
    torch.Tensor.relu_: _Kind(torch.relu, ALWAYS, _AT_0),
    F.relu6: _Kind(F.relu6, 1, lambda a, k: (0.0, 6.0)),
    F.hardtanh: _Kind(F.hardtanh, 3, lambda a, k: (float(_arg(a, k, 1, "min_val", -1.0)),
                                                   float(_arg(a, k, 2, "max_val", 1.0)))),
    F.hardswish: _Kind(F.hardswish, 1, _AT_3),
    F.hardsigmoid: _Kind(F.hardsigmoid, 1, _AT_3),
    F.leaky_relu: _Kind(F.leaky_relu, 2, _AT_0),
}


# hardsigmoid's and hardswish's backward kernels have no derivative of their
# own, which the fit's screen (a backward of the backward) needs: in
# float64 they run as PyTorch defines them, through hardtanh.
_TWICE_DIFFERENTIABLE = {
    F.hardsigmoid: lambda t: F.hardtanh(t + 3, 0.0, 6.0) / 6,
    F.hardswish: lambda t: t * F.hardtanh(t + 3, 0.0, 6.0) / 6,
}


class _Site:
    """One call of a kinked activation: its input (float64: still in the
    autograd graph), the function and its kinks."""

    def __init__(self, fn, kinks, x):
        self.fn, self.kinks, self.x = fn, kinks, x
        self.cotangent = None  # the float64 backward's cotangent of the output

    def keep(self, g):
        if self.cotangent is None:
            self.cotangent = g.detach()


class _Trace(TorchFunctionMode):
    """Records every kinked activation's call, in order. In float64
    (`graph`), each call runs out of place on a copy of its input, so that
    the input stays a node of the graph (an in-place activation then writes
    its result back, as the model expects), and a hook keeps the first
    cotangent its output gets (the model's backward)."""

    def __init__(self, graph):
        super().__init__()
        self.graph, self.sites = graph, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = _KINKED.get(func)
        if kind is None or not isinstance(args[0], torch.Tensor):
            return func(*args, **kwargs)
        kinks, x = kind.kinks(args, kwargs), args[0]
        at = kind.inplace_at
        inplace = at == ALWAYS or (at != NEVER and _arg(args, kwargs, at, "inplace", False))
        positional = tuple(args[1:at]) if at > 0 else tuple(args[1:])
        rest = {k: v for k, v in kwargs.items() if k != "inplace"}
        fn = (lambda t: kind.pure(t, *positional, **rest))
        if self.graph and func in _TWICE_DIFFERENTIABLE:
            fn = _TWICE_DIFFERENTIABLE[func]
        if not self.graph:
            self.sites.append(_Site(fn, kinks, x.detach().clone()))
            return func(*args, **kwargs)
        pre = x.clone()
        site = _Site(fn, kinks, pre)
        self.sites.append(site)
        y = fn(pre)
        y.register_hook(site.keep)
        if inplace:
            x.copy_(y)
            return x
        return y


def _without_checkpointing(model, dtype):
    """A copy of `model` in `dtype` with the library's checkpointing off:
    PyTorch's checkpoint runs a region's forward again in the backward
    pass, and a BatchNorm in it updates its running statistics twice
    (timm's ResNet-18 with set_grad_checkpointing: 0.19 m where one update
    gives 0.1 m); remat's program updates them once, as the model without
    checkpointing does. Gradients are the same either way."""
    m = copy.deepcopy(model).to(dtype)
    if dtype == torch.float64 and getattr(getattr(m, "config", None), "_experts_implementation", "eager") != "eager":
        # torch._grouped_mm (Hugging Face's default experts) takes no
        # float64: the reference runs the experts' own loop, the same sums.
        m.set_experts_implementation("eager")
    if hasattr(m, "set_grad_checkpointing"):
        m.set_grad_checkpointing(False)
    if getattr(m, "is_gradient_checkpointing", False):
        m.gradient_checkpointing_disable()
    return m


@contextlib.contextmanager
def _default_dtype(dtype):
    """Tensors the model makes without a dtype in `dtype`: XGLM's
    torch.full((), torch.finfo(attn.dtype).min) overflows float32 in a
    float64 run."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _cast(inputs, dtype):
    cast = (lambda t: t.to(dtype) if t.is_floating_point() else t)
    return {k: cast(v) for k, v in inputs.items()} if isinstance(inputs, dict) else tuple(cast(v) for v in inputs)


def model_loss(model, inputs, loss, loss_inputs):
    """The scalar a run differentiates: a Hugging Face model's own `.loss`
    (inputs a dict with `labels`), or loss(model(*inputs), *loss_inputs)."""
    if isinstance(inputs, dict):
        return model(**inputs).loss
    return loss(model(*inputs), *loss_inputs)


class Reference:
    """PyTorch's float32 and float64 runs of one forward and backward of a
    model (a copy; the model is not changed), and the flips its kinks
    allow. Fields: value64/32 (the loss), grads64/32 and state64/32 (by
    parameter and buffer name, float64 numpy arrays), near (elements within
    roundoff of a kink), torch_flips and torch_shift (the flips PyTorch's
    float32 took, and what they change in each gradient)."""

    def __init__(self, model, inputs, loss, loss_inputs):
        m32 = _without_checkpointing(model, torch.float32)
        trace32 = _Trace(graph=False)
        with trace32:
            value32 = model_loss(m32, _cast(inputs, torch.float32), loss, loss_inputs)
        value32.backward()
        m64 = _without_checkpointing(model, torch.float64)
        trace64 = _Trace(graph=True)
        with trace64, _default_dtype(torch.float64):
            value64 = model_loss(m64, _cast(inputs, torch.float64), loss, loss_inputs)
        value64.backward(retain_graph=True)
        if len(trace32.sites) != len(trace64.sites):
            raise AssertionError("the float32 and float64 runs called %d and %d kinked activations"
                                 % (len(trace32.sites), len(trace64.sites)))
        self.value32, self.value64 = value32.item(), value64.item()
        params = [(n, p) for n, p in m64.named_parameters() if p.grad is not None]
        self.grads64 = {n: p.grad.double().numpy() for n, p in params}
        self.grads32 = {n: p.grad.double().numpy() for n, p in m32.named_parameters() if p.grad is not None}
        self.state64 = {n: b.double().numpy() for n, b in m64.named_buffers() if "running" in n}
        self.state32 = {n: b.double().numpy() for n, b in m32.named_buffers() if "running" in n}
        self.state_scale = {n: _state_scale(model, m64, n) for n in self.state64}
        largest = max([np.max(np.abs(g)) for g in self.grads64.values()] + [0.0])
        self.grad_floor = GRAD_FLOOR * largest
        self._params = params
        # The elements near a kink, and the side PyTorch's float32 took.
        self.near, self._candidates, torch_took = 0, [], []
        for s32, s64 in zip(trace32.sites, trace64.sites):
            x64, x32 = s64.x.detach(), s32.x.double()
            band = BAND * (x32 - x64).abs().max()
            for k in s64.kinks:
                idx = torch.nonzero(((x64 - k).abs() < band).flatten()).flatten()
                self.near += len(idx)
                if not len(idx):
                    continue
                cot = (torch.zeros(len(idx), dtype=torch.float64) if s64.cotangent is None
                       else s64.cotangent.flatten()[idx].double())
                here = _slope(s64, x64.flatten()[idx])
                right, left = (_slope(s64, torch.tensor([k + d], dtype=torch.float64)) for d in (1e-9, -1e-9))
                jump = torch.where(here == right, left, right) - here
                taken = _slope(s64, x32.flatten()[idx]) - here
                for i, c, j, t in zip(idx.tolist(), cot.tolist(), jump.tolist(), taken.tolist()):
                    if c * j != 0.0:
                        self._candidates.append((s64, i, c * j))
                    if c * t != 0.0:
                        torch_took.append((s64, i, c * t))
        self.torch_flips = len(torch_took)
        self.torch_shift = self._change(torch_took)

    def _change(self, cotangents):
        """What adding these cotangents ((site, flat index, value) at
        activations' inputs) changes in every gradient, by parameter name:
        one backward. The backward pass is linear in its cotangents, so
        flips add."""
        if not cotangents:
            return {n: np.zeros(tuple(p.shape)) for n, p in self._params}
        by_site = {}
        for site, i, v in cotangents:
            if id(site) not in by_site:
                by_site[id(site)] = (site, torch.zeros_like(site.x).flatten())
            by_site[id(site)][1][i] += v
        sites = list(by_site.values())
        got = torch.autograd.grad([s.x for s, _ in sites], [p for _, p in self._params],
                                  [g.view_as(s.x) for s, g in sites], retain_graph=True, allow_unused=True)
        return {n: (g.double().numpy() if g is not None else np.zeros(tuple(p.shape)))
                for (n, p), g in zip(self._params, got)}

    def _screen(self, residual):
        """Each candidate flip's inner product with a run's residual,
        <D_e, W residual> with W = 1/scale^2 per gradient (the fit's
        metric), for all of them at once: the activations' inputs' vector-
        Jacobian products taken twice (a backward of the backward), which
        costs a few backward passes, not one per flip."""
        sites = list({id(s): s for s, _, _ in self._candidates}.values())
        probes = [torch.zeros_like(s.x, requires_grad=True) for s in sites]
        got = torch.autograd.grad([s.x for s in sites], [p for _, p in self._params], probes,
                                  create_graph=True, retain_graph=True, allow_unused=True)
        total = 0.0
        for (n, p), g in zip(self._params, got):
            if g is not None:
                w = torch.from_numpy(residual[n] / self._grad_scale(n) ** 2).to(g.dtype)
                total = total + (g * w.view_as(g)).sum()
        if not torch.is_tensor(total) or not total.requires_grad:
            return [0.0] * len(self._candidates)
        back = torch.autograd.grad(total, probes, retain_graph=True, allow_unused=True)
        by_site = {id(s): (b.flatten() if b is not None else None) for s, b in zip(sites, back)}
        return [v * by_site[id(s)][i].item() if by_site[id(s)] is not None else 0.0
                for s, i, v in self._candidates]

    def nearest(self, grads, mixed=True):
        """The flips (cotangents) whose reference g64 + their change is
        nearest `grads` in the least-squares sense, each gradient relative
        to its scale, found in rounds (at most FIT_ROUNDS): the flips taken
        so far and the MAX_FITTED candidates whose change points most along
        the residual they leave (_screen: half by the inner product's size,
        either sign, half by it per unit of cotangent) are fitted on a
        sample of every gradient (up to SAMPLE
        elements of each; a flip's change is dense upstream of its
        activation, so the sample sees it): every subset for up to
        EXHAUSTIVE_FLIPS of them, else least squares rounded to 0/1 and
        single flips while they help. The verdict uses the whole change
        again (_change). A flip left out can only make a run look worse:
        never a fault forgiven."""
        taken = []
        rng = np.random.default_rng(0)
        sample = {n: rng.choice(p.numel(), min(p.numel(), SAMPLE), replace=False) for n, p in self._params}
        r0 = np.concatenate([((grads[n] - self.grads64[n]).ravel()[sample[n]]) / self._grad_scale(n)
                             for n, _ in self._params])
        columns = {}  # (site, index) -> the flip's change on the sample
        for _ in range(FIT_ROUNDS if self._candidates else 0):
            change = self._change(taken)
            residual = {n: grads[n] - self.grads64[n] - change[n] for n in self.grads64}
            try:
                score = self._screen(residual)
            except RuntimeError:  # an op of the model without a second derivative
                score = [abs(v) for _, _, v in self._candidates]
            chosen = {(id(s), i) for s, i, _ in taken}
            # By the size of the inner product, either sign: flips at one
            # element that several layers read (DenseNet's concatenated
            # features, every BatchNorm at gamma 1 and beta 0) overlap, and
            # some of those a run took point against the residual the
            # others leave.
            # Half the pool by that size, half by it per unit of the flip's
            # cotangent (how well the element's backward matches what is
            # left, whatever the flip's size): a small flip that several
            # layers' flips overshadow is found by the second.
            pool, seen = list(taken), set(chosen)
            keys = ((lambda j: -abs(score[j]), lambda j: -abs(score[j] / self._candidates[j][2])) if mixed
                    else (lambda j: -score[j],))
            for key in keys:
                added = 0
                for j in sorted(range(len(score)), key=key):
                    site, i, _ = self._candidates[j]
                    if added == MAX_FITTED // len(keys):
                        break
                    if (score[j] != 0 if mixed else score[j] > 0) and (id(site), i) not in seen:
                        pool.append(self._candidates[j])
                        seen.add((id(site), i))
                        added += 1
            for site, i, v in pool:
                if (id(site), i) not in columns:
                    c = self._change([(site, i, v)])
                    columns[(id(site), i)] = np.concatenate(
                        [c[n].ravel()[sample[n]] / self._grad_scale(n) for n, _ in self._params])
            picked = self._fit(pool, len(taken), [columns[(id(s), i)] for s, i, _ in pool], r0, mixed)
            if {(id(s), i) for s, i, _ in picked} == chosen:
                break
            taken = picked
        return taken

    def refine(self, grads, flips, ratios):
        """For a run's `grads`, the flips `flips` with single flips toggled
        (added, or dropped if taken) while one lowers the verdict's own
        measure, the largest of ratios(change) ({tensor: its error over
        what it allows}; 1 or less passes), at most REFINE_ROUNDS times.
        A round tries the MAX_FITTED candidates that the residual of the
        failing gradients alone points at most (as nearest's pool). The
        fit works in least squares over every gradient, on a sample; a
        flip whose change lies in a few elements of a large gradient (one
        output channel of a conv weight) barely moves that cost, though
        it decides the verdict: Wide-ResNet-50-2's layer3.2.conv1.weight
        was 43 times PyTorch's error with one such flip missed, 1.5 times
        with it. Only single flips at elements within roundoff of a kink
        are tried: never a fault forgiven."""
        flips = list(flips)
        now = ratios(self._change(flips))
        for _ in range(REFINE_ROUNDS if self._candidates else 0):
            if max(now.values()) <= 1.0:
                break
            change = self._change(flips)
            residual = {n: (grads[n] - self.grads64[n] - change[n]) * (now[n] > 1.0) for n in self.grads64}
            try:
                score = self._screen(residual)
            except RuntimeError:  # an op of the model without a second derivative
                score = [abs(v) for _, _, v in self._candidates]
            pool = []
            for key in (lambda j: -abs(score[j]), lambda j: -abs(score[j] / self._candidates[j][2])):
                pool += [j for j in sorted(range(len(score)), key=key)[:MAX_FITTED // 2]
                         if score[j] != 0 and j not in pool]
            taken = {(id(s), i) for s, i, _ in flips}
            best = (max(now.values()), None, None)
            for j in pool:
                site, i, _ = self._candidates[j]
                toggled = ([f for f in flips if (id(f[0]), f[1]) != (id(site), i)] if (id(site), i) in taken
                           else flips + [self._candidates[j]])
                r = ratios(self._change(toggled))
                if max(r.values()) < best[0]:
                    best = (max(r.values()), toggled, r)
            if best[1] is None:
                break
            _, flips, now = best
        return flips

    def _fit(self, pool, kept, columns, r, refit):
        """The subset of the flips `pool` (its first `kept` taken so far,
        which stay unless `refit`) whose summed columns are nearest r (see
        nearest)."""
        if not pool:
            return []
        cols = np.stack(columns, axis=1)
        gram, dot = cols.T @ cols, cols.T @ r

        def cost(t):
            t = np.asarray(t, dtype=float)
            return t @ gram @ t - 2 * t @ dot
        k = len(pool)
        free = range(0 if refit else kept, k)
        if len(free) <= EXHAUSTIVE_FLIPS:
            fixed = [] if refit else [1] * kept
            t = fixed + list(min(itertools.product((0, 1), repeat=len(free)), key=lambda x: cost(fixed + list(x))))
        else:
            # The flips taken stay; the new ones start from least squares on
            # what those leave; then single flips in or out while they help.
            new = slice(kept, k)
            rest = dot[new] - gram[new, :kept] @ np.ones(kept)
            start = np.linalg.lstsq(gram[new, new], rest, rcond=None)[0]
            t = [1] * kept + list(np.clip(np.round(start), 0, 1).astype(int))
            improved = True
            while improved:
                improved = False
                for a in free:
                    other = t[:a] + [1 - t[a]] + t[a + 1:]
                    if cost(other) < cost(t):
                        t, improved = other, True
        return [f for f, bit in zip(pool, t) if bit]

    def _grad_scale(self, name):
        return max(np.max(np.abs(self.grads64[name])), self.grad_floor)

    def scale(self, name):
        """A tensor's scale: a gradient's largest float64 element, at least
        GRAD_FLOOR of the model's largest gradient element (a gradient that
        is 0 in exact arithmetic, a bias a BatchNorm removes, is rounding
        noise on both sides); a statistic's, _state_scale."""
        if name in self.grads64:
            return self._grad_scale(name)
        if name in self.state64:
            return self.state_scale[name]
        raise KeyError(name)

    def errors(self, value, grads, state, shift):
        """{name: error} for one run ("loss", each gradient, each
        statistic), its gradients against g64 + shift."""
        out = {"loss": abs(value - self.value64) / max(abs(self.value64), 1e-30)}
        for name, g64 in self.grads64.items():
            out[name] = np.max(np.abs(grads[name] - (g64 + shift[name]))) / self.scale(name) if g64.size else 0.0
        for name, s64 in self.state64.items():
            out[name] = np.max(np.abs(state[name] - s64)) / self.scale(name) if s64.size else 0.0
        return out


def _slope(site, x):
    """The activation's derivative at each element of x (a float64 vector),
    with its convention at a kink (relu'(0) = 0): one backward for them all
    (the activations are element-wise; HaloNet has thousands of elements
    near a kink, one backward each took minutes)."""
    v = x.detach().to(torch.float64).clone().requires_grad_(True)
    return torch.autograd.grad(site.fn(v).sum(), v)[0].detach()


def _state_scale(model, m64, name):
    """A BatchNorm statistic's scale. A running variance: its largest
    element. A running mean: also at least momentum times the largest
    root-mean-square of a channel's values (what the batch mean sums; its
    roundoff scales with them, not with the mean, which a BatchNorm's
    input can have near 0: timm's EfficientNet-B0's blocks.1.0.bn1)."""
    now, before = dict(m64.named_buffers()), dict(model.named_buffers())
    new = now[name].double()
    largest = new.abs().max().item() if new.numel() else 0.0
    prefix, _, field = name.rpartition(".")
    if field != "running_mean":
        return max(largest, 1e-30)
    bn = m64.get_submodule(prefix)
    var_name = (prefix + "." if prefix else "") + "running_var"
    momentum = bn.momentum if bn.momentum is not None else 1.0
    mean = (new - (1 - momentum) * before[name].double()) / momentum
    var = (now[var_name].double() - (1 - momentum) * before[var_name].double()) / momentum
    rms = (var.clamp(min=0) + mean * mean).sqrt().max().item()
    return max(largest, momentum * rms, 1e-30)


def judge(ref, value, grads, state):
    """[(name, the run's error, PyTorch float32's error, passes)] for a
    run's loss, gradients (by parameter name) and statistics (by buffer
    name), and (flips the run took, flips PyTorch's float32 took, elements
    near a kink). PyTorch's error is against g64 shifted by the flips it
    took (known exactly: its float32 activations' inputs are traced). The
    run is tried against g64 as it is, then with PyTorch's flips, then
    with the fitted flips nearest it (Reference.nearest, in its two
    searches), then with those refined by the verdict's own measure
    (Reference.refine); its first passing verdict counts, else the last."""
    theirs = ref.errors(ref.value32, ref.grads32, ref.state32, ref.torch_shift)
    def verdict(change):
        mine = ref.errors(value, grads, state, change)
        return [(n, mine[n], theirs[n], mine[n] <= RATIO * max(theirs[n], FLOOR)) for n in mine]

    def passes(rows):
        return all(ok for _, _, _, ok in rows)
    took, rows = 0, verdict(ref._change([]))
    if not passes(rows):
        took, rows = ref.torch_flips, verdict(ref.torch_shift)
    # The fits, computed only when the others fail: flips added round by
    # round along the residual, then a search that may also drop them.
    for mixed in (False, True):
        if passes(rows):
            break
        flips = ref.nearest(grads, mixed=mixed)
        took, rows = len(flips), verdict(ref._change(flips))
    if not passes(rows):
        def ratios(change):
            mine = ref.errors(value, grads, state, change)
            return {n: mine[n] / (RATIO * max(theirs[n], FLOOR)) for n in mine}
        flips = ref.refine(grads, flips, ratios)
        took, rows = len(flips), verdict(ref._change(flips))
    return rows, (took, ref.torch_flips, ref.near)
