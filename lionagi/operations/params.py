"""The parameter contract of every operation: typed, strict, validated once before the turn.

A :class:`~lionagi.Branch` method is the one declared signature of its operation. Its body hands
its arguments to :func:`bind`, which turns them into the operation's frozen parameter object
(:class:`ChatParams`, :class:`OperateParams`, ...) and is the one place where a bad argument
becomes an exception:

- a keyword the operation does not know raises :class:`~lionagi.errors.UnknownParameterError`
  (a ``TypeError``) naming it, and, for a name upstream lionagi used, saying what to use;
- a value of the wrong type or out of range raises :class:`~lionagi.errors.OperationError`
  naming the parameter, the value and what is expected.

Model request options travel through one channel: the common typed names of
:class:`ModelOptions` (``temperature``, ``max_tokens``, ...) plus an ``extra_body`` mapping for
anything provider-specific, merged into the request body as the ``openai`` SDK does. Nothing
else reaches a request.
"""

# No `from __future__ import annotations` here: the fields' annotations are evaluated as the
# classes are defined, so pydantic does not compile each one from a string at import.
import dataclasses
import difflib
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Concatenate,
    Literal,
    ParamSpec,
    Self,
    TypeAlias,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic.dataclasses import dataclass, is_pydantic_dataclass
from typing_extensions import TypedDict

from lionagi._declared import same_parameters
from lionagi._pydantic_methods import PydanticDataclassMethods, filling_class
from lionagi.errors import OperationError, UnknownParameterError
from lionagi.operations.fields import FieldModel, RequestFields
from lionagi.protocols.messages import Instruction, _refuse_assignment
from lionagi.protocols.tools import OfferedTools
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

__all__ = [
    "OPERATION_PARAMS",
    "ActParams",
    "ActionStrategy",
    "ChatParams",
    "CommunicateParams",
    "HandleValidation",
    "Instruct",
    "InterpretParams",
    "ModelOptions",
    "NoOptions",
    "OperateParams",
    "OperationParams",
    "ParseParams",
    "ReActParams",
    "RunParams",
    "ToolsArg",
    "bind",
    "known_names",
    "request_options",
    "same_parameters",
]

HandleValidation: TypeAlias = Literal["raise", "return_value", "return_none"]
ActionStrategy: TypeAlias = Literal["concurrent", "sequential"]
ToolsArg: TypeAlias = OfferedTools
Count: TypeAlias = Annotated[int, Field(ge=0)]
Images: TypeAlias = Sequence[str] | None


class NoOptions(TypedDict, total=False):
    """The options of an operation that calls no model: none (the type of its ``**options``,
    there so an upstream keyword still gets a helpful error)."""


@with_config(ConfigDict(strict=True, extra="forbid"))
class ModelOptions(TypedDict, total=False):
    """The model request options every operation accepts, by their common names.

    Each is sent only when given, on top of the model's own ``request_defaults``. Anything a
    provider offers beyond these goes in ``extra_body``, whose keys are merged into the request
    body unchanged (as the ``openai`` SDK's ``extra_body=`` does).
    """

    temperature: float
    max_tokens: int
    top_p: float
    stop: str | list[str]
    seed: int
    frequency_penalty: float
    presence_penalty: float
    extra_body: dict[str, JsonValue]


class Instruct(BaseModel):
    """Upstream lionagi's bundle of what to ask: pass it as ``instruct=`` (or a dict of these
    keys) to ``communicate``, ``operate``, ``ReAct`` and ``ReActStream``.

    Its values fill the call's ``instruction``, ``guidance`` and ``context`` (and, for
    ``operate``, ``reason`` and ``actions``); giving one both ways is an error.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built when used

    instruction: str | None = None
    guidance: str | None = None
    context: JsonValue = None
    reason: bool | None = None
    actions: bool | None = None


# Each parameter class builds its validator on first use, so a program pays only for the
# operations it calls (a call whose every value is already what validation returns needs none:
# see ``bind``).
_STRICT = ConfigDict(strict=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True)
MODEL_OPTION_NAMES = frozenset(ModelOptions.__annotations__)
#: request-body keys the library sets itself; extra_body may not replace them
_OWN_BODY_KEYS = frozenset(
    {"model", "messages", "tools", "response_format", "stream", "stream_options"}
)


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class OperationParams(PydanticDataclassMethods):
    """Base of the parameter objects: strict, immutable, no unknown fields.

    Every field is required: the defaults live in the Branch method, the one declared
    signature. ``options`` holds the validated :class:`ModelOptions` given to the call.

    They are slotted pydantic dataclasses, as messages are: building one from keywords
    validates them, and they keep the ``BaseModel`` methods (``model_dump``,
    ``model_validate``, ``model_copy``, ...), but are not ``BaseModel`` instances.
    """

    #: the Branch method the parameters belong to, named in error messages (set below from
    #: :data:`OPERATION_PARAMS`: the first method name that maps to the class)
    operation: ClassVar[str]
    #: alias -> field: other accepted names of a field (upstream lionagi's names)
    aliases: ClassVar[Mapping[str, str]] = {}
    #: whether the operation calls a model and so takes :class:`ModelOptions`
    takes_model_options: ClassVar[bool] = True
    #: the fields an ``instruct=`` (:class:`Instruct`) may fill
    instruct_fields: ClassVar[tuple[str, ...]] = ()

    options: ModelOptions

    @classmethod
    def model_validate(cls, obj: Any, *, strict: bool | None = None) -> Self:
        """Validate ``obj`` (an instance, or a mapping of every field's value) into this
        class, as a ``BaseModel``'s ``model_validate`` would (the class is strict, so the
        validator itself takes no mapping: its items are passed as keywords)."""
        if isinstance(obj, Mapping):
            return cls(**obj)
        return super().model_validate(obj, strict=strict)

    @property
    def request_options(self) -> dict[str, Any]:
        """The options as request-body keys: the common names, then ``extra_body`` merged."""
        options = self.options
        return request_options(options) if options else {}  # none (nearly always): no call


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class _AskParams(OperationParams):
    """What every operation that asks the chat model shares: the question and the model."""

    aliases: ClassVar[Mapping[str, str]] = {"imodel": "chat_model"}

    instruction: str | Instruction | None
    guidance: str | None
    context: JsonValue
    chat_model: iModel | None


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class ChatParams(_AskParams):
    """:meth:`Branch.chat` and :meth:`Branch.chat_and_record`."""

    response_format: type[BaseModel] | dict[str, Any] | None
    request_fields: RequestFields | None
    images: Images
    return_ins_res_message: bool


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class CommunicateParams(_AskParams):
    """:meth:`Branch.communicate`."""

    instruct_fields: ClassVar[tuple[str, ...]] = ("instruction", "guidance", "context")

    response_format: type[BaseModel] | None
    request_fields: RequestFields | None
    parse_model: iModel | None
    images: Images
    num_parse_retries: Count
    handle_validation: HandleValidation


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class ParseParams(OperationParams):
    """:meth:`Branch.parse`."""

    text: str
    response_format: type[BaseModel]
    max_retries: Count
    handle_validation: HandleValidation
    parse_model: iModel | None


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class InterpretParams(OperationParams):
    """:meth:`Branch.interpret`."""

    text: Annotated[str, Field(min_length=1, pattern=r"\S")]
    domain: str | None
    style: str | None
    interpret_model: iModel | None


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class OperateParams(_AskParams):
    """:meth:`Branch.operate`."""

    instruct_fields: ClassVar[tuple[str, ...]] = (
        "instruction",
        "guidance",
        "context",
        "reason",
        "actions",
    )

    response_format: type[BaseModel] | None
    field_models: Sequence[FieldModel] | None
    tools: ToolsArg
    actions: bool
    invoke_actions: bool
    reason: bool
    parse_model: iModel | None
    images: Images
    action_strategy: ActionStrategy
    handle_validation: HandleValidation
    max_parse_retries: Count


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class ActParams(OperationParams):
    """:meth:`Branch.act` (it takes no model options)."""

    takes_model_options: ClassVar[bool] = False

    strategy: ActionStrategy
    suppress_errors: bool
    record: bool


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class ReActParams(_AskParams):
    """:meth:`Branch.ReAct` and :meth:`Branch.ReActStream`."""

    instruct_fields: ClassVar[tuple[str, ...]] = ("instruction", "guidance", "context")

    instruction: str | Instruction  # required here
    tools: ToolsArg
    response_format: type[BaseModel] | None
    max_extensions: Count
    extension_allowed: bool
    parse_model: iModel | None
    action_strategy: ActionStrategy
    max_parse_retries: Count
    return_analysis: bool
    verbose: bool


@dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
class RunParams(_AskParams):
    """:meth:`Branch.run`."""

    instruction: str | Instruction  # required here
    images: Images
    max_tool_rounds: Count
    session_id: Annotated[str, Field(min_length=1)] | None


P = TypeVar("P", bound=OperationParams)

#: Branch method name -> its parameter class
OPERATION_PARAMS: Mapping[str, type[OperationParams]] = {
    "chat": ChatParams,
    "chat_and_record": ChatParams,
    "communicate": CommunicateParams,
    "parse": ParseParams,
    "interpret": InterpretParams,
    "operate": OperateParams,
    "act": ActParams,
    "ReAct": ReActParams,
    "ReActStream": ReActParams,
    "run": RunParams,
}

# Each class's operation is the first method name that maps to it ("chat" for ChatParams,
# "ReAct" for ReActParams): the names are written once, in the mapping above.
for _name, _params in reversed([*OPERATION_PARAMS.items()]):
    _params.operation = _name
# Immutable as a frozen BaseModel is: assigning raises pydantic's frozen_instance error (a
# frozen dataclass's own __setattr__ raises FrozenInstanceError, an AttributeError).
for _class in {OperationParams, _AskParams, *OPERATION_PARAMS.values()}:
    _class.__setattr__ = _refuse_assignment  # type: ignore[method-assign]
    _class.__delattr__ = _refuse_assignment  # type: ignore[method-assign,assignment]
del _name, _params, _class

# Names upstream lionagi (or the openai SDK) accepts that lionagi does not: what to do instead.
_TOOLS_ON_OPERATE = (
    "register tools on the Branch and offer them with operate(tools=..., actions=True)"
)
_HINTS: Mapping[str, str] = {
    "actions": "this operation runs no tools; use operate(actions=True) or ReAct()",
    "tools": "this operation offers no tools; use operate(tools=...) or ReAct(tools=...)",
    "tool_schemas": _TOOLS_ON_OPERATE,
    "skip_validation": (
        "for the raw reply text leave response_format unset; to get the text back when parsing "
        "fails pass handle_validation='return_value'"
    ),
    "clear_messages": (
        "the history is append-only; start a new Branch (Branch(system=..., messages=...)) "
        "for a fresh conversation"
    ),
    "plain_content": "pass the text as the instruction",
    "progression": (
        "every call sends the whole history; build a Branch with the messages you want "
        "(Branch(messages=...))"
    ),
    "sender": "set the sender once with Branch(user=...)",
    "recipient": "messages have no recipient in lionagi; leave it out",
    "image_detail": "pass images as URLs or data: URLs; set detail through extra_body if needed",
    "fuzzy_match_kwargs": "parsing is tolerant by default (fences, prose, small JSON errors)",
    "fuzzy_match": "parsing is tolerant by default (fences, prose, small JSON errors)",
    "operative_model": "use response_format=<a pydantic model class>",
    "request_model": "use response_format=<a pydantic model class>",
    "request_type": "use response_format=<a pydantic model class>",
    "operative": "use response_format=<a pydantic model class>",
    "return_operative": "the result already is an instance of your response_format",
    "include_token_usage_to_model": (
        "token usage is on each AssistantResponse.usage and in the turn's RunEnd signal"
    ),
    "verbose_action": "subscribe to MessageAdded signals through a Session to watch tool calls",
    "action_kwargs": "pass action_strategy= to operate() or ReAct()",
    "stream": "use branch.run(...) to stream a turn",
    "model": "pass chat_model=iModel(...) (or a Branch(chat_model=...))",
    "messages": "operations send the Branch's history; add messages with Branch(messages=...)",
    "timeout": "set the time limit on the model: iModel(..., timeout=seconds)",
    "api_key": "set the key on the model: iModel(..., api_key=...)",
    "reasoning_effort": "pass it as a provider option: extra_body={'reasoning_effort': ...}",
    "tool_choice": "pass it as a provider option: extra_body={'tool_choice': ...}",
    "response_format": "this operation returns text; use communicate(response_format=...)",
    "interpret": "call branch.interpret(text) first and pass its result as the instruction",
    "interpret_domain": "call branch.interpret(text, domain) first",
    "interpret_style": "call branch.interpret(text, domain, style) first",
    "sample_writing": "describe the wanted writing in style=",
    "exclude_fields": "give operate a response_format without those fields",
    "request_params": "use response_format= or field_models=",
    "response_params": "use response_format= or field_models=",
}
_RENAMES: Mapping[str, Mapping[str, str]] = {
    "operate": {"num_parse_retries": "max_parse_retries"},
    "ReAct": {"num_parse_retries": "max_parse_retries"},
    "communicate": {"max_parse_retries": "num_parse_retries", "max_retries": "num_parse_retries"},
    "parse": {"num_parse_retries": "max_retries", "max_parse_retries": "max_retries"},
    "act": {"verbose": "nothing (tool calls are MessageAdded signals)"},
}


def bind(cls: type[P], arguments: Mapping[str, Any], *, operation: str | None = None) -> P:
    """Validate a Branch method's arguments into ``cls`` (the one translator of bad arguments).

    ``arguments`` are the method's ``locals()`` taken first thing: the named parameters, plus
    ``options`` (its ``**options``) and ``self``, both dropped or split here. Unknown names in
    ``options`` raise :class:`UnknownParameterError`; bad values raise :class:`OperationError`.

    A call whose every value is already what strict validation returns unchanged (text,
    ``None``, flags, a model, one of a ``Literal``'s names: the common call) is stored as given,
    without running the validator: it would check the same and build the same object, at
    several times the cost on every turn. Any other value goes through the validator.
    """
    name = operation or cls.operation
    given_as_is = _as_given(cls, name, arguments)
    if given_as_is is not None:
        return given_as_is
    values = dict(arguments)
    values.pop("self", None)
    given = values.pop("options", None)
    options = _options(cls, name, given) if given else {}
    given_as = _apply_aliases(cls, name, values) if cls.aliases else {}
    if cls.instruct_fields:
        _merge_instruct(cls, name, values)
    values["options"] = options
    try:
        return cls(**values)  # keywords: a strict dataclass validator refuses a dict
    except ValidationError as exc:
        raise _bad_value(cls, name, exc.errors(include_url=False)[0], given_as) from None


_MISSING: Any = object()
_new = object.__new__
_NONE_TYPE = type(None)
_JSON_SCALARS = frozenset({_NONE_TYPE, str, bool, int, float})


class _Unchanged:
    """The values strict validation of one annotation returns unchanged: those of exactly one
    of ``types``, instances of ``classes`` (an arbitrary class is checked with ``isinstance``;
    a pydantic model or dataclass instance is not revalidated), the texts in ``names`` (a
    ``Literal``'s) and ints from ``minimum`` on (a ``Count``). Anything else is left to the
    validator."""

    __slots__ = ("classes", "minimum", "names", "types")

    def __init__(
        self,
        types: frozenset[type] = frozenset(),
        names: frozenset[str] = frozenset(),
        minimum: int | None = None,
    ) -> None:
        self.types = types
        self.classes = tuple(t for t in types if t not in _JSON_SCALARS)
        self.names = names
        self.minimum = minimum

    def __or__(self, other: "_Unchanged") -> "_Unchanged":
        minimums = [m for m in (self.minimum, other.minimum) if m is not None]
        return _Unchanged(
            self.types | other.types, self.names | other.names, min(minimums, default=None)
        )

    def keeps(self, value: object) -> bool:
        """Whether validation returns ``value`` unchanged, for a value whose exact type is not
        one of ``types`` (checked first, inline)."""
        kind = type(value)
        if kind is str:
            return value in self.names
        if kind is int:
            return self.minimum is not None and value >= self.minimum  # type: ignore[operator]
        return bool(self.classes) and isinstance(value, self.classes)


def _unchanged(annotation: Any) -> _Unchanged:
    """Which values of ``annotation`` strict validation returns as they are (see
    :class:`_Unchanged`); conservative: a shape not named here leaves everything to the
    validator."""
    if annotation is None or annotation is _NONE_TYPE:
        return _Unchanged(frozenset({_NONE_TYPE}))
    if annotation is JsonValue:  # containers are copied by validation, scalars are not
        return _Unchanged(_JSON_SCALARS)
    origin = get_origin(annotation)
    if origin is Union or origin is UnionType:
        found = _Unchanged()
        for member in get_args(annotation):
            found = found | _unchanged(member)
        return found
    if origin is Literal:
        args = get_args(annotation)
        if all(type(arg) is str for arg in args):
            return _Unchanged(names=frozenset(args))
        return _Unchanged()
    if annotation is Count:
        return _Unchanged(minimum=0)
    if origin is None and isinstance(annotation, type):
        # an arbitrary class is checked with isinstance, a pydantic model or pydantic dataclass
        # instance of exactly its class is not revalidated; a plain dataclass would be rebuilt
        plain_dataclass = dataclasses.is_dataclass(annotation) and not is_pydantic_dataclass(
            annotation
        )
        if not plain_dataclass:
            return _Unchanged(frozenset({annotation}))
    return _Unchanged()


#: a field's checks: the exact types validation returns unchanged, and the test for the rest
_Check: TypeAlias = tuple[frozenset[type], Callable[[object], bool]]


def _field_checks(cls: type[OperationParams]) -> dict[str, _Check] | None:
    """Each field's checks (:func:`_unchanged`) but ``options``', by name, for the fast paths
    that store values without the validator; ``None`` when ``cls`` has validators of its own,
    which must see every call."""
    infos = getattr(cls, "__pydantic_decorators__", None)
    if infos is None or any(
        (infos.validators, infos.field_validators, infos.root_validators, infos.model_validators)
    ):
        return None
    checks: dict[str, _Check] = {}
    for field in dataclasses.fields(cls):
        if field.name != "options":
            unchanged = _unchanged(field.type)
            checks[field.name] = (unchanged.types, unchanged.keeps)
    return checks


AsGiven: TypeAlias = Callable[[Mapping[str, Any], str], Any]


def _as_given_function(cls: type[OperationParams]) -> AsGiven:
    """The function :func:`_as_given` runs for ``cls``, made once from its fields.

    It reads each field's value, tests it against what validation returns unchanged
    (:func:`_unchanged`), and stores it. Nothing is compiled: the tests are a tuple of
    (name, exact types, fallback test) the function loops over, so a class's first call costs
    no code generation (which cost more than a whole turn). A parameter object is immutable,
    so a value stored through its class costs a call of ``object.__setattr__`` (~1.2k
    instructions a field on CPython 3.11, more than the validator's whole work). The values are
    stored instead through a subclass that adds nothing but Python's own ``__setattr__`` (its
    stores are plain slot stores), and the finished object is then made an instance of ``cls``
    by assigning its ``__class__``: same slots, same layout, immutable from then on.
    """
    checks = _field_checks(cls)
    if checks is None:
        return _never_as_given  # a validator of the class's own must see every call
    fields = tuple((name, *check) for name, check in checks.items())
    accepted = frozenset(name for name, _, _ in fields) | {
        "self",
        "options",
        "instruct",
        *cls.aliases,
    }
    refused = (*cls.aliases, "instruct")  # given, they need the validator's path
    builder = _builder(cls)

    def as_given(arguments: Mapping[str, Any], operation: str) -> Any:
        if not accepted.issuperset(arguments):
            return None
        for name in refused:
            if arguments.get(name) is not None:
                return None
        params: Any = _new(builder)
        for name, types, keeps in fields:
            try:
                value = arguments[name]
            except KeyError:
                return None
            if type(value) not in types and not keeps(value):
                return None
            setattr(params, name, value)
        given = arguments.get("options")
        params.options = _options(cls, operation, given) if given else {}
        params.__class__ = cls
        return params

    as_given.__qualname__ = f"as_given[{cls.__name__}]"
    return as_given


def _never_as_given(arguments: Mapping[str, Any], operation: str) -> None:
    """The fast path of a class with validators of its own: every call goes to the validator."""
    return None


_AS_GIVEN: dict[type[OperationParams], AsGiven] = {}


def _as_given(cls: type[P], operation: str, arguments: Mapping[str, Any]) -> P | None:
    """``cls`` holding ``arguments`` as they are, when validation would return each unchanged;
    ``None`` when any value needs the validator (or an alias, ``instruct=`` or an unknown name
    is given, or a field is missing)."""
    function = _AS_GIVEN.get(cls)
    if function is None:
        function = _AS_GIVEN[cls] = _as_given_function(cls)
    params: P | None = function(arguments, operation)
    return params


R = TypeVar("R")
PS = ParamSpec("PS")
Given: TypeAlias = Callable[[tuple[Any, ...], dict[str, Any]], Any]


def bound_parameters(
    of: Callable[Concatenate[Any, PS], Any],
    cls: type[P],
    operation: str,
    text: Callable[[Any, str, P], Any] | None = None,
) -> Callable[[Callable[[Any, P], R]], Callable[Concatenate[Any, PS], R]]:
    """:func:`same_parameters` for a method whose body only binds the call into ``cls`` (as
    ``operation``) and hands the parameters on: the decorated function receives them.

    The common call (every value given is one strict validation returns unchanged, see
    :func:`bind`) is bound straight from its positional and keyword arguments: only the values
    given are checked, the declared defaults were checked once, and no ``locals()``-shaped
    dict is built. Any other call goes the declared way (``of``'s signature, then :func:`bind`),
    so it is refused with the same errors.

    ``text`` serves the commonest call of all, the instruction text alone and nothing else:
    it gets the text and the parameters of every default (a ``cls`` whose instruction is
    ``""``, built once: to read the other parameters from) and returns the method's result,
    or ``None`` to leave the call to the ways above.
    """
    declare = same_parameters(of)
    parameters = tuple(inspect.signature(of).parameters.values())

    def decorate(fn: Callable[[Any, P], R]) -> Callable[Concatenate[Any, PS], R]:
        def declared(self: Any, arguments: dict[str, Any]) -> R:
            return fn(self, bind(cls, arguments, operation=operation))

        slow = declare(declared)
        fast: Given | None = None
        defaults: P | None = None

        @functools.wraps(fn)
        def method(self: Any, /, *args: PS.args, **kwargs: PS.kwargs) -> R:
            nonlocal fast, defaults
            if text is not None and not kwargs and len(args) == 1 and type(args[0]) is str:
                if defaults is None:
                    defaults = fn_defaults(self)
                done: R | None = text(self, args[0], defaults)
                if done is not None:
                    return done
            given = fast
            if given is None:  # made at the first call: a program pays only for what it calls
                given = fast = _given_function(cls, parameters, operation)
            params = given(args, kwargs)
            if params is None:
                return slow(self, *args, **kwargs)
            return fn(self, params)

        def fn_defaults(self: Any) -> P:
            """The parameters of a call that gives ``""`` alone (see ``text`` above)."""
            nonlocal fast
            given = fast
            if given is None:  # the same function the common call is bound with
                given = fast = _given_function(cls, parameters, operation)
            params: P | None = given(("",), {})
            if params is None:  # the instruction is no positional field, or needs the validator
                raise TypeError(f"{operation}: text= needs the instruction as first parameter")
            return params

        method.__signature__ = inspect.signature(slow)  # type: ignore[attr-defined]
        return method

    return decorate


def _kept(value: object, types: frozenset[type], keeps: Callable[[object], bool]) -> bool:
    """Whether validation would return ``value`` unchanged (the field's checks)."""
    return type(value) in types or keeps(value)


class _CallPlan:
    """What :func:`_given_function` works out once per parameters class and signature: the
    checks of each field, which positional place fills which field, and for each number of
    positional arguments given, the defaults of the fields left and the required ones that
    must then come as keywords."""

    __slots__ = ("checks", "defaults", "most", "place", "positional_checks", "required", "special")

    def __init__(
        self,
        checks: dict[str, _Check],
        by_name: dict[str, inspect.Parameter],
        positional: list[str],
    ) -> None:
        empty = inspect.Parameter.empty
        place = {name: index for index, name in enumerate(positional)}
        defaults: list[tuple[tuple[str, Any], ...]] = []
        required: list[frozenset[str]] = []
        for count in range(len(positional) + 1):
            rest = [name for name in checks if place.get(name, count) >= count]
            left = [(name, by_name[name].default) for name in rest]
            defaults.append(tuple((name, value) for name, value in left if value is not empty))
            required.append(frozenset(name for name, value in left if value is empty))
        self.checks = checks
        self.place = place
        self.defaults = tuple(defaults)
        self.required = tuple(required)
        self.positional_checks = tuple((name, *checks[name]) for name in positional)
        self.special = frozenset(by_name) - checks.keys() | {"self"}  # aliases, instruct=
        self.most = len(positional)

    @classmethod
    def of(
        cls, params: type[OperationParams], parameters: Sequence[inspect.Parameter]
    ) -> "_CallPlan | None":
        """The plan for ``params`` bound from a method of ``parameters``, or ``None`` when no
        call can skip the validator (a validator of the class's own, a field the signature
        cannot fill, a positional parameter that is no field, a default the validator would
        change)."""
        checks = _field_checks(params)
        if checks is None:
            return None  # a validator of the class's own must see every call
        declared = parameters[1:]  # after self
        by_name = {p.name: p for p in declared if p.kind is not inspect.Parameter.VAR_KEYWORD}
        positional = [p.name for p in declared if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        if not (by_name.keys() >= checks.keys() and checks.keys() >= set(positional)):
            return None
        for name, (types, keeps) in checks.items():
            default = by_name[name].default
            if default is not inspect.Parameter.empty and not _kept(default, types, keeps):
                return None
        return cls(checks, by_name, positional)

    def fill_positional(self, params: Any, args: tuple[Any, ...]) -> bool:
        """Store the positional arguments after the first; ``False`` if one needs the validator."""
        for value, (name, types, keeps) in zip(args[1:], self.positional_checks[1:], strict=False):
            if not _kept(value, types, keeps):
                return False
            setattr(params, name, value)
        return True

    def fill_keywords(
        self, params: Any, kwargs: dict[str, Any], count: int
    ) -> dict[str, Any] | Literal[False] | None:
        """Store the keyword arguments that are fields; the rest are the signature's
        ``**options`` (returned, ``None`` when there are none). ``False`` when the call needs
        the declared way: an alias or ``instruct=``, a field given twice, a value the
        validator would change."""
        options: dict[str, Any] | None = None
        for name, value in kwargs.items():
            check = self.checks.get(name)
            if check is None:
                if name in self.special:
                    return False
                if options is None:
                    options = {}
                options[name] = value
            elif self.place.get(name, self.most) < count or not _kept(value, *check):
                return False  # given twice (the signature's TypeError), or to be validated
            else:
                setattr(params, name, value)
        return options


def _given_function(
    cls: type[OperationParams], parameters: Sequence[inspect.Parameter], operation: str
) -> Given:
    """The function :func:`bound_parameters`' method tries first for ``cls``: ``cls`` holding
    a call's arguments (``args`` after ``self``, ``kwargs``), or ``None`` when the call needs
    the declared way (a value the validator would change, an alias, ``instruct=``, a call the
    signature refuses). Built from the fields without generating code, as :func:`_as_given`;
    the first positional argument (nearly always the instruction) is checked inline."""
    plan = _CallPlan.of(cls, parameters)
    if plan is None:
        return _never_given
    most, required, defaults = plan.most, plan.required, plan.defaults
    first = plan.positional_checks[0] if plan.positional_checks else None
    builder = _builder(cls)

    def given(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        count = len(args)
        if count > most:
            return None
        needed = required[count]
        if needed and not kwargs.keys() >= needed:
            return None  # a required field not given: the signature's TypeError
        params: Any = _new(builder)
        if count:
            value = args[0]
            name, types, keeps = first  # type: ignore[misc]  # count <= most: there is a first
            if type(value) not in types and not keeps(value):
                return None
            setattr(params, name, value)
            if count > 1 and not plan.fill_positional(params, args):
                return None
        for name, value in defaults[count]:
            setattr(params, name, value)
        options = plan.fill_keywords(params, kwargs, count) if kwargs else None
        if options is False:
            return None
        params.options = _options(cls, operation, options) if options else {}
        params.__class__ = cls
        return params

    given.__qualname__ = f"given[{cls.__name__}, {operation}]"
    return given


def _never_given(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The fast path of a class with validators of its own: every call goes the declared way."""
    return None


_BUILDERS: dict[type[OperationParams], type[Any]] = {}


def _builder(cls: type[OperationParams]) -> type[Any]:
    """The class ``cls``'s parameters are filled through (see :func:`filling_class`), one per
    class."""
    builder = _BUILDERS.get(cls)
    if builder is None:
        builder = _BUILDERS[cls] = filling_class(cls)
    return builder


def _options(
    cls: type[OperationParams], operation: str, given: Mapping[str, Any] | None
) -> ModelOptions:
    """The call's ``**options``, validated: names the operation does not take raise
    :class:`UnknownParameterError`."""
    if not given:
        return {}
    known = MODEL_OPTION_NAMES if cls.takes_model_options else frozenset()
    extra = [key for key in given if key not in known]
    if extra:
        raise _unknown(cls, operation, extra[0])
    return _model_options(operation, given)


def _apply_aliases(
    cls: type[OperationParams], operation: str, values: dict[str, Any]
) -> dict[str, str]:
    """Move values given by an alias (``imodel=``) to their field; return field -> the alias
    the caller used, for error messages."""
    given_as: dict[str, str] = {}
    for alias, target in cls.aliases.items():
        value = values.pop(alias, None)
        if value is None:
            continue
        if values.get(target) is not None:
            raise OperationError(
                f"{operation}() got both {target}= and its alias {alias}=; pass one"
            )
        given_as[target] = alias
        values[target] = value
    return given_as


def _merge_instruct(cls: type[OperationParams], operation: str, values: dict[str, Any]) -> None:
    """Fill the fields ``instruct=`` (or an Instruct/dict given as the instruction) carries."""
    instruct = values.pop("instruct", None)
    first = values.get("instruction")
    if instruct is None and isinstance(first, Instruct | Mapping):
        instruct, values["instruction"] = first, None  # upstream's ReAct(instruct) positional
    if instruct is None:
        return
    carried = _as_instruct(operation, instruct)
    for field in cls.instruct_fields:
        value = getattr(carried, field)
        if value is None:
            continue
        given = values.get(field)
        if given is not None and given is not False:
            raise OperationError(
                f"{operation}() got {field}= both directly and in instruct=; pass it once"
            )
        values[field] = value


def _as_instruct(operation: str, instruct: object) -> Instruct:
    """``instruct=`` as an :class:`Instruct` (a dict is validated into one)."""
    if isinstance(instruct, Instruct):
        return instruct
    if not isinstance(instruct, Mapping):
        raise OperationError(
            f"{operation}() got instruct={instruct!r:.80}: expected an Instruct or a dict"
        )
    try:
        return Instruct.model_validate(dict(instruct))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in error["loc"])
        raise OperationError(
            f"{operation}() got instruct with a bad {where!r}: {error['msg']}; its keys are "
            f"{', '.join(Instruct.model_fields)}"
        ) from None


def request_options(options: ModelOptions) -> dict[str, Any]:
    """Validated :class:`ModelOptions` as request-body keys (``extra_body`` merged last)."""
    if not options:
        return {}
    body: dict[str, Any] = {k: v for k, v in options.items() if k != "extra_body"}
    body.update(options.get("extra_body") or {})
    return body


@functools.cache
def _model_options_adapter() -> TypeAdapter[ModelOptions]:
    """The validator of :class:`ModelOptions`, built the first time a call passes options."""
    return TypeAdapter(ModelOptions)


def _model_options(operation: str, given: Mapping[str, Any]) -> ModelOptions:
    try:
        options = _model_options_adapter().validate_python(dict(given))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = str(error["loc"][0])
        shown = _describe(get_type_hints(ModelOptions)[field])
        raise OperationError(
            f"{operation}() got {field}={error['input']!r:.80}: expected {shown}"
        ) from None
    extra_body = options.get("extra_body") or {}
    clash = sorted(k for k in extra_body if k in _OWN_BODY_KEYS or k in options)
    if clash:
        raise OperationError(
            f"{operation}() got extra_body keys {clash} that the request sets itself or that "
            "were also given as named options; pass each option once, by its own parameter"
        )
    return options


def known_names(cls: type[OperationParams]) -> list[str]:
    """Every keyword ``cls``'s Branch method accepts (its parameters, aliases, model options)."""
    own = [f.name for f in dataclasses.fields(cls) if f.name != "options"]
    if not cls.takes_model_options:
        return own
    instruct = ["instruct"] if cls.instruct_fields else []
    return [*own, *instruct, *cls.aliases, *sorted(MODEL_OPTION_NAMES)]


def _unknown(cls: type[OperationParams], operation: str, key: str) -> UnknownParameterError:
    message = f"{operation}() got an unexpected keyword argument {key!r}"
    renamed = _RENAMES.get(operation, {}).get(key)
    hint = _HINTS.get(key)
    known = known_names(cls)
    if renamed is not None:
        message += f"; use {renamed}" + ("=" if renamed.isidentifier() else "")
    elif hint is not None and key not in known:
        message += f" (upstream lionagi accepted it; here: {hint})"
    else:
        close = difflib.get_close_matches(key, known, n=1)
        if close:
            message += f"; did you mean {close[0]!r}?"
        elif cls.takes_model_options:
            message += (
                "; model request options are "
                f"{', '.join(sorted(MODEL_OPTION_NAMES - {'extra_body'}))}, and anything "
                "provider-specific goes in extra_body={...}"
            )
    return UnknownParameterError(message, operation=operation, name=key)


def _bad_value(
    cls: type[OperationParams], operation: str, error: "ErrorDetails", given_as: Mapping[str, str]
) -> OperationError:
    field = str(error["loc"][0]) if error["loc"] else "(arguments)"
    value = error.get("input")
    if error["type"] == "missing":
        return OperationError(f"{operation}() needs {field}=")
    annotation = {f.name: f.type for f in dataclasses.fields(cls)}.get(field, _MISSING)
    expected = _describe(annotation) if annotation is not _MISSING else "a valid value"
    kind = error["type"]
    if kind in ("string_too_short", "string_pattern_mismatch"):
        detail = "expected non-empty text"
    elif kind == "sequence_str":
        detail = f"expected a list of text, not one string ({expected})"
    elif kind.startswith(("greater_than", "less_than")):
        detail = f"expected {expected} {error['msg'].lower().removeprefix('input should be ')}"
    else:
        detail = f"expected {expected}"
    return OperationError(f"{operation}() got {given_as.get(field, field)}={value!r:.80}: {detail}")


_PLAIN_NAMES: Mapping[Any, str] = {
    bool: "True or False",
    int: "an int",
    float: "a number",
    str: "text",
    None: "None",
    type(None): "None",
    JsonValue: "JSON data (dicts, lists, text, numbers, True/False, None)",
}


def _describe(annotation: Any) -> str:
    """A short human reading of a field's type, for error messages."""
    if getattr(annotation, "__metadata__", None) is not None:  # Annotated[T, ...]
        return _describe(annotation.__origin__)
    try:
        plain = _PLAIN_NAMES.get(annotation)
    except TypeError:  # an unhashable annotation
        plain = None
    return plain if plain is not None else _describe_generic(annotation)


def _describe_generic(annotation: Any) -> str:
    args = get_args(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin is Union or origin is UnionType:
        return " or ".join(dict.fromkeys(_describe(a) for a in args))
    if origin is type:
        return "a pydantic model class" if args and args[0] is BaseModel else "a class"
    name = getattr(annotation, "__name__", None)
    return str(name or annotation).replace("typing.", "")
