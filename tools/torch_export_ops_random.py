"""torch_export_ops.py's entries for dropout's noise written by hand from
uniform values: Hugging Face's drop path, floor(keep + rand(shape)) (Swin,
ConvNeXt, BEiT, DINOv2, SegFormer), and masks drawn as rand(shape) < keep
or > p. Each becomes the Random of bernoulli(keep), which the product with
a value maps to the contract's dropout (torch_export_ops.py's mul); any
other use of uniform values fails naming it."""

from torch_export_lower import Random
from torch_export_ops import TABLE, _scalar, op


class Uniform:
    """rand's values, uniform in [offset, offset + 1), of a shape."""

    def __init__(self, offset, shape):
        self.offset, self.shape = offset, tuple(shape)


@op("rand.default", "rand_like.default")
def _rand(ctx, *args, **kwargs):
    return Uniform(0.0, ctx.out_shape())


def _uniform_plus(base):
    """add with a number added to uniform values: still uniform, shifted."""
    def add(ctx, a, b, alpha=1):
        for u, c in ((a, b), (b, a)):
            if isinstance(u, Uniform):
                k = _scalar(ctx, c)
                if k is None or alpha != 1:
                    ctx.fail("uniform random values (torch.rand) added to a tensor (remat's: dropout's "
                             "noise, floor(keep + rand))")
                return Uniform(u.offset + k, u.shape)
        return base(ctx, a, b, alpha)
    return add


for _name in ("add.Tensor", "add.Scalar"):
    TABLE[_name] = _uniform_plus(TABLE[_name])


@op("floor.default")
def _floor(ctx, x):
    """floor(keep + U) is 1 with probability keep, else 0: bernoulli(keep)."""
    if not isinstance(x, Uniform) or not 0 < x.offset < 1:
        ctx.fail("floor of %s (remat's: dropout's noise, floor(keep + rand) with 0 < keep < 1)"
                 % ("rand() + %r" % x.offset if isinstance(x, Uniform) else "the model's values"))
    return Random(x.offset, False, x.shape)


def _uniform_below(base, name):
    """rand() < keep (or <=) is bernoulli(keep); rand() > p (or >=) is
    bernoulli(1 - p)."""
    def compare(ctx, a, b):
        if isinstance(a, Uniform):
            k = _scalar(ctx, b)
            if a.offset != 0 or k is None or not 0 < k < 1:
                ctx.fail("a comparison of uniform random values with %r (remat's: dropout's noise, rand() < keep "
                         "with 0 < keep < 1)" % (b if k is None else k))
            return Random(k if name in ("lt", "le") else 1.0 - k, False, a.shape)
        return base(ctx, a, b)
    return compare


for _name in ("lt", "le", "gt", "ge"):
    TABLE["%s.Scalar" % _name] = _uniform_below(TABLE["%s.Scalar" % _name], _name)


def _random_kept(base):
    """detach of dropout's noise (it has no gradient to stop): itself."""
    def detach(ctx, x):
        return x if isinstance(x, (Random, Uniform)) else base(ctx, x)
    return detach


TABLE["detach.default"] = _random_kept(TABLE["detach.default"])
