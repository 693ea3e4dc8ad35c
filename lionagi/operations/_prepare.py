"""What every model call of a turn shares: context providers, the request, the model.

Context providers are gathered once per turn, on its first model request, into the turn's
context (ADR-0018 D3); request preparation reads the blocks from the scope only, and renders them
ephemerally into the system message of the request. Nothing here touches Branch state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, JsonValue

from lionagi.errors import OperationError
from lionagi.operations.fields import request_fields_model
from lionagi.protocols.context_providers import ProviderReport
from lionagi.protocols.messages import Instruction, Message, RecordedCopy, text_instruction
from lionagi.service._text import check_text, clean_json
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.operations.params import ChatParams, CommunicateParams, OperateParams, RunParams
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = [
    "answer_format",
    "apply_context_providers",
    "build_instruction",
    "instruction_for",
    "model_for",
    "request_messages",
    "schema_of",
]


def schema_of(response_format: type[BaseModel] | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema of a pydantic model class or a schema dict (validated shape)."""
    if response_format is None:
        return None
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        try:
            return response_format.model_json_schema()
        except Exception as exc:  # pydantic cannot describe some field types in JSON schema
            raise OperationError(
                f"response_format {response_format.__name__} has no JSON schema: {exc}"
            ) from None
    if isinstance(response_format, Mapping):
        return dict(response_format)
    raise OperationError(
        "response_format must be a pydantic model class or a JSON-schema dict, got "
        f"{response_format!r}"
    )


def answer_format(
    params: ChatParams | CommunicateParams, operation: str
) -> type[BaseModel] | Mapping[str, Any] | None:
    """The call's ``response_format``, or the model its ``request_fields`` describe."""
    if params.request_fields is None:
        return params.response_format
    if params.response_format is not None:
        raise OperationError(
            f"{operation}() got both response_format= and request_fields=; pass one"
        )
    return request_fields_model(params.request_fields, operation)


_TEXT = frozenset({str, type(None)})
_SCALARS = frozenset({str, int, float, bool, type(None)})


def build_instruction(
    instruction: str | Instruction | None,
    *,
    guidance: str | None = None,
    context: JsonValue = None,
    response_format: type[BaseModel] | Mapping[str, Any] | None = None,
    images: Sequence[str] | None = None,
    sender: str | None = None,
) -> Instruction:
    """An :class:`Instruction` from an operation's validated parameters (before any I/O)."""
    if isinstance(instruction, Instruction):
        return _given_instruction(instruction, guidance, context, response_format, images)
    if instruction is None and guidance is None and context is None and not images:
        raise OperationError("nothing to ask: give an instruction, guidance, context or images")
    # Only the values given. (Spelled out rather than looped: this runs once per turn.)
    fields: dict[str, Any] = {}
    if instruction is not None:
        fields["instruction"] = _caller_text("instruction", instruction)
    if guidance is not None:
        fields["guidance"] = _caller_text("guidance", guidance)
    if context is not None:
        fields["context"] = _caller_text("context", context)
    if (
        response_format is None
        and not images
        and type(instruction) in _TEXT
        and type(guidance) in _TEXT
        and type(context) in _SCALARS
        and type(sender) in _TEXT
    ):  # the common question: every value is what validation would return unchanged
        return text_instruction(instruction, guidance, context, sender)  # type: ignore[arg-type]
    if sender is not None:
        fields["sender"] = sender
    if response_format is not None:
        fields["response_format"] = schema_of(response_format)
    if images:
        fields["images"] = tuple(images)
    try:
        return Instruction(**fields)
    except ValueError as exc:  # pydantic: context that is not JSON, and the like
        raise OperationError(f"invalid instruction parameters: {exc}") from None


def _given_instruction(instruction: Instruction, *extras: object) -> Instruction:
    """An Instruction object the caller built, which nothing else may add to."""
    if any(extra is not None for extra in extras):
        raise OperationError(
            "pass either an Instruction object or instruction text with guidance/context/"
            "response_format/images, not both"
        )
    return instruction


def instruction_for(
    branch: Branch,
    params: ChatParams | CommunicateParams | OperateParams | RunParams,
    response_format: type[BaseModel] | Mapping[str, Any] | None = None,
) -> Instruction:
    """The Instruction a call asks with: its question, images and ``response_format``, sent
    by the Branch's user."""
    instruction = params.instruction
    if (
        type(instruction) is str
        and params.guidance is None
        and params.context is None
        and response_format is None
        and not params.images
    ):  # a question in text alone (nearly every call): build_instruction's common case, direct
        built = text_instruction_for(branch, instruction)
        if built is not None:
            return built
    return build_instruction(
        params.instruction,
        guidance=params.guidance,
        context=params.context,
        response_format=response_format,
        images=params.images,
        sender=branch.user,
    )


def text_instruction_for(branch: Branch, text: str) -> Instruction | None:
    """:func:`instruction_for` a call that gives the instruction ``text`` alone, or ``None``
    when the Branch's user is no plain text (:func:`build_instruction` then builds it)."""
    sender = branch.user
    if type(sender) not in _TEXT:
        return None
    if not text.isascii():  # ASCII text cannot hold a lone surrogate
        check_text(text, "instruction", OperationError)
    return text_instruction(text, None, None, sender)


def _caller_text(name: str, value: Any) -> Any:
    """``value`` (text or JSON data the caller gave as ``name``), checked for lone surrogates:
    text that holds one could never be sent, so it is refused before the turn."""
    if isinstance(value, str):
        if not value.isascii():  # ASCII text cannot hold a surrogate
            check_text(value, name, OperationError)
    elif clean_json(value) is not value:
        raise OperationError(
            f"{name} holds a lone surrogate, which cannot be sent as UTF-8; decode its text "
            "with errors='replace' (or fix its source) before passing it"
        )
    return value


def model_for(
    scope: TurnScope,
    branch: Branch,
    explicit: iModel | None,
    role: Literal["chat", "parse"] = "chat",
) -> iModel:
    """The model a call inside ``scope`` uses: an explicit one, else the turn's primary model
    (chat), else the Branch's parse model (parse work nested in another operation)."""
    if explicit is not None:
        return explicit
    context = scope.context
    if role == "parse" and not (scope.owns_lifecycle and context.operation == "parse"):
        return branch.parse_model or context.model
    return context.model


async def apply_context_providers(
    branch: Branch, instruction: Instruction, scope: TurnScope
) -> None:
    """Gather the Branch's context providers into the turn (once per turn, ADR-0018 D3)."""
    context = scope.context
    if context.provider_report is not None:
        return
    registry = branch.context_providers
    if registry is None:
        return
    if branch.system is None:
        context.provider_report = ProviderReport(skipped=tuple(registry.names))
        return
    report = await registry.gather(branch, instruction)
    context.provider_report = report
    context.provider_blocks = tuple(report.blocks)


def request_messages(
    branch: Branch, scope: TurnScope, pending: Sequence[Message] = ()
) -> Sequence[Message]:
    """History plus ``pending`` (messages of this request that are not recorded), with the
    turn's provider blocks rendered into a request-only copy of the system message. The
    history is not copied (see :meth:`MessageManager.request_copy`)."""
    history = branch.msgs
    first = None
    blocks = scope.context.provider_blocks
    if blocks and (system := history.system) is not None:
        extra = "\n\n".join(blocks)
        first = system.model_copy(update={"content": f"{system.content}\n\n{extra}"})
    return RecordedCopy(history, first, pending)  # history.request_copy's, one call less
