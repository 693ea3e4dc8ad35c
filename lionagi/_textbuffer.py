"""A text accumulator whose memory is the text itself, whatever the number of pieces.

Streamed replies arrive in many small pieces; a list of them costs a pointer and an object per
piece, and ``io.StringIO`` several bytes per character. ``TextBuffer`` keeps UTF-8 bytes in one
growing ``bytearray`` (amortized O(1) per piece); lone surrogates round-trip unchanged.
"""

from __future__ import annotations

__all__ = ["TextBuffer"]


class TextBuffer(bytearray):
    """Append text pieces; read the whole text back with :meth:`getvalue`.

    It is the ``bytearray`` itself (the UTF-8 bytes), not an object holding one: every model
    stream makes one, and a Python ``__init__`` building the array would cost more than
    the array (~1.2k instructions per buffer, and ~0.1k per piece written)."""

    __slots__ = ()

    def write(self, text: str) -> None:
        self += text.encode("utf-8", "surrogatepass")

    def getvalue(self) -> str:
        return self.decode("utf-8", "surrogatepass")

    # clear() and truth are bytearray's: clearing gives the memory back, an empty buffer is
    # false
