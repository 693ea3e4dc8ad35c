"""Small concurrency helpers: apply a function to many items on one task group."""

from lionagi.ln._async_call import alcall, bcall

__all__ = ["alcall", "bcall"]
