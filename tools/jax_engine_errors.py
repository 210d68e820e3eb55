"""tools/jax_engine.py's two kinds of failure: what the engine refuses
(exit 77, "unsupported: WHY") and a malformed program or input (exit 1)."""


class Unsupported(Exception):
    """What the program asks that this engine cannot express in JAX."""


class ProgramError(Exception):
    """A program or input that is malformed: the message names where."""
