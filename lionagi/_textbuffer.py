"""A text accumulator whose memory is the text itself, whatever the number of pieces.

Streamed replies arrive in many small pieces; a list of them costs a pointer and an object per
piece, and ``io.StringIO`` several bytes per character. ``TextBuffer`` keeps UTF-8 bytes in one
growing ``bytearray`` (amortized O(1) per piece); lone surrogates round-trip unchanged.
"""

from __future__ import annotations

__all__ = ["TextBuffer"]


class TextBuffer:
    """Append text pieces; read the whole text back with :meth:`getvalue`."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data = bytearray()

    def write(self, text: str) -> None:
        self._data += text.encode("utf-8", "surrogatepass")

    def getvalue(self) -> str:
        return self._data.decode("utf-8", "surrogatepass")

    def clear(self) -> None:
        if self._data:
            self._data = bytearray()  # a new one: the old may be large, let it go

    def __bool__(self) -> bool:
        return bool(self._data)
