"""Embeddings: the typed result of ``await model.embed(texts)`` and the OpenAI-compatible call.

``POST {base_url}/embeddings`` with ``{"model": ..., "input": [texts]}`` is the shape OpenAI,
Ollama, vLLM, Gemini's OpenAI endpoint, Mistral, Together, Fireworks and NVIDIA NIM share.
:meth:`lionagi.service.imodel.iModel.embed` splits long inputs into batches and joins the
answers in input order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from lionagi.protocols.messages import Usage

if TYPE_CHECKING:
    from lionagi.service.providers.openai import OpenAIChatProvider

__all__ = ["Embeddings", "openai_embeddings"]


class Embeddings(BaseModel):
    """Vectors for a list of texts, in the order the texts were given.

    ``len(result)`` is the number of texts, ``result[i]`` the vector of text ``i``, and
    iterating yields the vectors. ``usage`` sums the input tokens of every batch.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)  # built on the first embed()

    vectors: tuple[tuple[float, ...], ...] = ()
    model: str | None = None
    provider: str | None = None
    usage: Usage = Field(default_factory=Usage)

    @property
    def dimensions(self) -> int | None:
        """Length of the vectors (``None`` when there are none)."""
        return len(self.vectors[0]) if self.vectors else None

    def __len__(self) -> int:
        return len(self.vectors)

    def __getitem__(self, index: int) -> tuple[float, ...]:
        return self.vectors[index]

    def __iter__(self) -> Iterator[tuple[float, ...]]:  # type: ignore[override]
        return iter(self.vectors)

    @classmethod
    def join(cls, parts: Sequence[Embeddings]) -> Embeddings:
        """One result from the results of consecutive batches."""
        usage = Usage()
        for part in parts:
            usage = usage + part.usage
        return cls(
            vectors=tuple(v for part in parts for v in part.vectors),
            model=next((p.model for p in parts if p.model), None),
            provider=next((p.provider for p in parts if p.provider), None),
            usage=usage,
        )


async def openai_embeddings(
    provider: OpenAIChatProvider,
    texts: Sequence[str],
    *,
    model: str,
    options: Mapping[str, Any],
) -> Embeddings:
    """One ``/embeddings`` request for ``texts`` (one batch). Typed errors as for chat:
    HTTP statuses map to :mod:`lionagi.service.errors`, a reply we cannot read is a
    ``ProtocolError``."""
    body: dict[str, Any] = {"model": model, "input": list(texts), **options}
    data = await provider.post_json("/embeddings", body)
    rows = _rows(provider, data, len(texts))
    vectors: list[tuple[float, ...] | None] = [None] * len(texts)
    for position, row in enumerate(rows):
        index, vector = _row(row, position)
        if not 0 <= index < len(texts) or vectors[index] is not None or vector is None:
            raise provider.protocol_error(
                f"malformed embedding at position {position} (expected an index and a list "
                f"of numbers; a base64 encoding_format is not supported): {str(row)[:200]}"
            )
        vectors[index] = vector
    usage = data.get("usage")
    tokens = usage.get("prompt_tokens", 0) if isinstance(usage, dict) else 0
    return Embeddings(
        vectors=tuple(v for v in vectors if v is not None),
        model=data.get("model") if isinstance(data.get("model"), str) else model,
        provider=provider.name,
        usage=Usage(input_tokens=tokens if isinstance(tokens, int) else 0),
    )


def _rows(provider: OpenAIChatProvider, data: Any, count: int) -> list[Any]:
    """The answer's ``data`` rows, one per text asked for."""
    if not isinstance(data, dict):
        raise provider.protocol_error(f"embeddings answer is not a JSON object: {data!r:.200}")
    rows = data.get("data")
    if not isinstance(rows, list) or len(rows) != count:
        got = len(rows) if isinstance(rows, list) else "no"
        raise provider.protocol_error(
            f"asked for {count} embeddings, the answer has {got} (keys: {sorted(data)[:8]})"
        )
    return rows


def _row(row: Any, position: int) -> tuple[int, tuple[float, ...] | None]:
    """A row's text index and vector (index -1 or vector ``None`` when unreadable)."""
    if not isinstance(row, dict):
        return -1, None
    index = row.get("index", position)
    vector = row.get("embedding")
    if not isinstance(index, int) or not isinstance(vector, list) or not _finite(vector):
        return -1, None
    return index, tuple(float(x) for x in vector)


def _finite(values: list[Any]) -> bool:
    return all(isinstance(x, int | float) and math.isfinite(x) for x in values)
