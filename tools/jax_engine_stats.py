"""tools/jax_engine.py's memory numbers (stats.json; its docstring says
what each counts): the residuals saved_residuals lists, and a compiled
phase's peak from memory_analysis()."""

from jax_engine_errors import ProgramError


def residual_stats(jax, f, args, wrt_idx):
    """(residual_bytes, host_residual_bytes, listing) of saved_residuals for f
    differentiated with respect to args[i], i in wrt_idx: f as a function of
    those inputs alone, the others closed over (saved_residuals reports them
    "from a constant"). Residuals "from the argument" or "from a constant"
    are inputs: not counted. host_residual_bytes: those in host memory (an
    offload policy's), counted in residual_bytes too."""
    try:
        from jax.ad_checkpoint import saved_residuals
    except ImportError:  # jax >= 0.8 keeps it private; print_saved_residuals is its public face
        from jax._src.ad_checkpoint import saved_residuals

    def g(*w):
        a = list(args)
        for i, v in zip(wrt_idx, w):
            a[i] = v
        return f(*a)

    total, host, listing = 0, 0, []
    for aval, src in saved_residuals(g, *[args[i] for i in wrt_idx]):
        listing.append("%s %s" % (aval.str_short(short_dtypes=True), src))
        if not src.startswith(("from the argument", "from a constant")):
            nbytes = int(aval.size) * aval.dtype.itemsize
            total += nbytes
            if "host" in str(getattr(aval, "memory_space", "")).lower():
                host += nbytes
    return total, host, listing


def peak_stats(compiled):
    """(peak_bytes, every field) of a compiled function's memory_analysis()."""
    m = compiled.memory_analysis()
    if m is None:
        raise ProgramError("memory_analysis() returned None for the compiled gradient")
    fields = {k: int(getattr(m, k)) for k in dir(m)
              if k.endswith("_in_bytes") and isinstance(getattr(m, k), int)}
    peak = (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            - m.alias_size_in_bytes)
    return int(peak), fields
