"""Rendering a request as an Anthropic Messages body: content blocks, tools, options."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from lionagi.errors import ConfigurationError
from lionagi.protocols._render import (
    complete_tool_calls,
    instruction_text,
    output_text,
    render_cache,
    schema_instruction,
    schema_is_asked,
)
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionagi.protocols.tool_spec import ToolSpec
from lionagi.service._options import apply_options, drop_tool_settings
from lionagi.service.providers._encoded import WireFormat, dumps, wire_body

if TYPE_CHECKING:
    from lionagi.service.types import ModelRequest

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "anthropic_body",
    "anthropic_tool",
    "anthropic_wire_body",
    "continued_body",
    "to_anthropic_messages",
]

DEFAULT_MAX_TOKENS = 4096
_ANTHROPIC = "anthropic"


def _stop_sequences(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


# common option names Anthropic spells differently, and those it has no counterpart for
_RENAMES = {"stop": ("stop_sequences", _stop_sequences)}
_REFUSED = {
    "seed": "no sampling seed",
    "presence_penalty": "no presence penalty",
    "frequency_penalty": "no frequency penalty",
    "logit_bias": "no logit bias",
    "logprobs": "no log probabilities",
    "top_logprobs": "no log probabilities",
    "n": "one reply per request",
    "response_format": "structured output is asked for in the prompt",
    "max_completion_tokens": "the name is max_tokens",
}


def anthropic_body(request: ModelRequest, *, stream: bool, provider: str) -> dict[str, Any]:
    """The Messages body for ``request``; ``max_tokens`` defaults to 4096.

    Anthropic has no JSON-object mode, so a ``response_format`` is asked for in the prompt:
    by the instruction that carries it, else by a paragraph of the system text.
    """
    system, messages = to_anthropic_messages(request.messages)
    schema = request.response_format
    if schema is not None and not schema_is_asked(request.messages, schema):
        note = schema_instruction(schema)
        system = note if system is None else f"{system}\n\n{note}"
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": messages,
    }
    if system is not None:
        body["system"] = system
    body.update(_fields(request, stream=stream, provider=provider))  # options may override
    return body


def anthropic_wire_body(request: ModelRequest, *, stream: bool, provider: str) -> bytes:
    """:func:`anthropic_body` encoded as JSON, assembled from the conversation's encoded prefix
    (see :mod:`~lionagi.service.providers._encoded`): the same JSON value, with each message
    rendered and encoded once over the conversation's requests. A request whose schema goes
    into the system text is encoded whole."""
    if request.response_format is not None:
        return dumps(anthropic_body(request, stream=stream, provider=provider))
    messages = request.messages
    lead = messages[0] if len(messages) > 1 and isinstance(messages[0], System) else None
    fields = _fields(request, stream=stream, provider=provider)
    if "messages" in fields or "system" in fields:
        return dumps(anthropic_body(request, stream=stream, provider=provider))  # rare shapes

    def with_system(state: _State) -> dict[str, Any]:
        texts = state[0] if lead is None else (lead.content, *state[0])
        if not texts:
            return fields
        return {**fields, "system": "\n\n".join(texts)}

    return wire_body(messages, _FORMAT, "messages", with_system)


def _fields(request: ModelRequest, *, stream: bool, provider: str) -> dict[str, Any]:
    """Every field of the body but the messages and the system text."""
    body: dict[str, Any] = {"model": request.model, "max_tokens": DEFAULT_MAX_TOKENS}
    if request.tools:
        body["tools"] = [anthropic_tool(tool) for tool in request.tools]
    apply_options(body, request.options, provider=provider, renames=_RENAMES, refused=_REFUSED)
    drop_tool_settings(body, ("tool_choice",))  # parallel use is set inside tool_choice
    if stream:
        body["stream"] = True
    else:
        body.pop("stream", None)
    return body


def continued_body(
    body: dict[str, Any], content: Sequence[dict[str, Any]], container: str | None
) -> dict[str, Any]:
    """``body`` asking the model to go on with a reply that stopped with ``pause_turn``.

    ``content`` (the blocks of every answer of the reply so far, server-tool blocks included)
    goes back as the assistant turn, joined to a trailing assistant message of ``body`` if
    there is one; ``container`` (the code-execution container the reply ran in) goes with it.
    """
    messages = list(body["messages"])
    if messages and messages[-1]["role"] == "assistant":
        prior = messages[-1]["content"]
        if isinstance(prior, str):
            prior = [{"type": "text", "text": prior}]
        messages[-1] = {"role": "assistant", "content": [*prior, *content]}
    else:
        messages.append({"role": "assistant", "content": list(content)})
    continued = {**body, "messages": messages}
    if container is not None:
        continued["container"] = container
    return continued


_DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


def _anthropic_image(url: str) -> dict[str, Any]:
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    match = _DATA_URL.match(url)
    if match is None:
        raise ConfigurationError(
            f"image {url[:60]!r} is neither an http(s) URL nor a base64 data: URL "
            "(data:<media type>;base64,<data>)"
        )
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": match["media"], "data": match["data"]},
    }


def _system(message: System) -> tuple[str, list[dict[str, Any]]]:
    return "system", [{"type": "text", "text": message.content}]


def _instruction(message: Instruction) -> tuple[str, list[dict[str, Any]]]:
    text = instruction_text(message)
    blocks = [_anthropic_image(url) for url in message.images]
    if text:
        blocks.append({"type": "text", "text": text})
    return "user", blocks


def _assistant(message: AssistantResponse) -> tuple[str, list[dict[str, Any]]]:
    # thinking goes back first and verbatim: Anthropic checks its signature
    blocks = [dict(r.block) for r in message.reasoning if r.format == _ANTHROPIC and r.block]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    return "assistant", blocks


def _tool_use(message: ActionRequest) -> tuple[str, list[dict[str, Any]]]:
    block = {
        "type": "tool_use",
        "id": message.call_id,
        "name": message.function,
        "input": message.arguments,
    }
    return "assistant", [block]


def _tool_result(message: ActionResponse) -> tuple[str, list[dict[str, Any]]]:
    block = {
        "type": "tool_result",
        "tool_use_id": message.call_id,
        "content": output_text(message.output),
        "is_error": message.is_error,
    }
    return "user", [block]


# message kind -> its (role, content blocks); checked in order, so subclasses render as their base
_PARTS: tuple[tuple[type[Any], Callable[[Any], tuple[str, list[dict[str, Any]]]]], ...] = (
    (System, _system),
    (Instruction, _instruction),
    (AssistantResponse, _assistant),
    (ActionRequest, _tool_use),
    (ActionResponse, _tool_result),
)


def _anthropic_part(message: Message) -> tuple[str, list[dict[str, Any]]]:
    """The memoized (role, content blocks) of one message; system text for a System."""
    cached = render_cache(message).get(_ANTHROPIC)
    if cached is not None:
        role_blocks: tuple[str, list[dict[str, Any]]] = cached
        return role_blocks
    render = next((part for kind, part in _PARTS if isinstance(message, kind)), None)
    if render is None:
        raise ConfigurationError(f"cannot render a {type(message).__name__} message")
    role_blocks = render(message)
    render_cache(message)[_ANTHROPIC] = role_blocks
    return role_blocks


def to_anthropic_messages(
    messages: Sequence[Message],
) -> tuple[str | None, list[dict[str, Any]]]:
    """Render ``messages`` as Anthropic Messages: ``(system text, messages)``.

    System messages become the separate system text; consecutive messages of the same role
    are merged into one, so roles alternate as the API requires. A tool call without a result
    gets an error result.
    """
    system, out = _anthropic_wire(messages)
    return ("\n\n".join(system) if system else None), out


def _anthropic_wire(messages: Sequence[Message]) -> tuple[list[str], list[dict[str, Any]]]:
    """The system texts of ``messages`` and their wire messages, same-role neighbours merged."""
    messages = complete_tool_calls(messages)
    system: list[str] = []
    out: list[dict[str, Any]] = []
    owned: dict[str, Any] | None = None  # merged dict at out[-1] built by this render
    for message in messages:
        role, blocks = _anthropic_part(message)
        if role == "system":
            system.append(blocks[0]["text"])
            continue
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            if owned is not None and out[-1] is owned:
                owned["content"].extend(blocks)
            else:
                owned = {"role": role, "content": [*out[-1]["content"], *blocks]}
                out[-1] = owned
        else:
            out.append({"role": role, "content": blocks})
    return system, out


# what Anthropic's rendering carries across messages: the system texts so far and the role of
# the last wire message (a following message of that role would merge into it)
_State = tuple[tuple[str, ...], str | None]


class _AnthropicFormat(WireFormat):
    """Anthropic Messages: every system message goes to the system text, and neighbouring
    messages of one role merge, so a prefix ends only where the role changes between two
    messages that are there."""

    lead_alone = False
    lead_system_apart = True
    initial_state: _State = ((), None)

    def render(self, messages: Sequence[Message], state: _State) -> tuple[list[Any], _State]:
        system, out = _anthropic_wire(messages)
        last = out[-1]["role"] if out else state[1]
        return out, ((*state[0], *system), last)

    def may_end(self, tail: Sequence[Message], end: int, state: _State) -> bool:
        before = _wire_role(reversed(tail[:end])) or state[1]
        after = _wire_role(tail[end:])
        return before is not None and after is not None and before != after

    def fits(self, tail: Sequence[Message], state: _State) -> bool:
        after = _wire_role(tail)
        return after is None or after != state[1]


def _wire_role(messages: Iterable[Message]) -> str | None:
    """The role of the first of ``messages`` that makes a wire message."""
    for message in messages:
        role, blocks = _anthropic_part(message)
        if role != "system" and blocks:
            return role
    return None


_FORMAT = _AnthropicFormat("anthropic:encoded-prefix")


def anthropic_tool(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an Anthropic ``tools`` entry."""
    entry: dict[str, Any] = {"name": spec.name}
    if spec.description:
        entry["description"] = spec.description
    entry["input_schema"] = spec.parameters
    return entry
