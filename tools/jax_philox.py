"""remat's random bits (engines/api/philox.h: Philox4x32-10) in jnp, for
tools/jax_engine.py's dropout: the same mask as remat's engines, bit for bit."""

# Philox4x32-10 (engines/api/philox.h): the constants of the paper.
_PHILOX_MUL = (0xD2511F53, 0xCD9E8D57)
_PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)


def _mulhilo(jnp, a, b):
    """(hi, lo) of the 64-bit product of the constant a and uint32 array b,
    in uint32 arithmetic (JAX runs with x64 off): 16-bit halves."""
    u = jnp.uint32
    a_lo, a_hi = u(a & 0xFFFF), u(a >> 16)
    b_lo, b_hi = b & u(0xFFFF), b >> u(16)
    ll, lh, hl, hh = b_lo * a_lo, b_hi * a_lo, b_lo * a_hi, b_hi * a_hi
    mid = (ll >> u(16)) + (lh & u(0xFFFF)) + (hl & u(0xFFFF))
    hi = hh + (lh >> u(16)) + (hl >> u(16)) + (mid >> u(16))
    return hi, b * u(a)


def random_bits(jax, seed, key, n):
    """The n words RandomBits(seed, key, i) gives, i = 0..n-1: Philox4x32-10
    of the counter {i / 4 (64 bits), key (64 bits)} under the key {seed, 0},
    word i % 4 (engines/api/philox.cc)."""
    jnp = jax.numpy
    u = jnp.uint32
    blocks = (n + 3) // 4
    c0 = jnp.arange(blocks, dtype=u)
    c1 = jnp.zeros_like(c0)
    c2 = jnp.full_like(c0, key & 0xFFFFFFFF)
    c3 = jnp.full_like(c0, (key >> 32) & 0xFFFFFFFF)
    k0 = jax.lax.bitcast_convert_type(seed.astype(jnp.int32), u)
    k1 = u(0)
    for _ in range(10):
        hi0, lo0 = _mulhilo(jnp, _PHILOX_MUL[0], c0)
        hi1, lo1 = _mulhilo(jnp, _PHILOX_MUL[1], c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + u(_PHILOX_WEYL[0])
        k1 = k1 + u(_PHILOX_WEYL[1])
    return jnp.stack([c0, c1, c2, c3], axis=1).reshape(-1)[:n]
