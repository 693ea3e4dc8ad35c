"""Tool schemas, argument validation, execution (threads, timeouts), the registry, jsonable."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import inspect
import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any, Literal
from uuid import UUID

import anyio
import pytest
import sniffio
from pydantic import BaseModel, Field

from lionagi.errors import (
    DuplicateToolError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from lionagi.protocols.tools import Tool, ToolRegistry, jsonable


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Location(BaseModel):
    city: str
    country: str = "NL"


def get_weather(
    location: Location,
    unit: Unit = Unit.CELSIUS,
    days: int = 1,
    detail: Literal["short", "long"] = "short",
    tags: list[str] | None = None,
    extra: dict[str, float] | None = None,
    verbose: bool = False,
    note: Annotated[str, Field(description="from the annotation")] = "",
) -> str:
    """Look up the weather
    for a place.

    Longer explanation that is not part of the description.

    Args:
        location: Where to look.
        unit (Unit): Temperature unit,
            either scale.
        days: How many days.
        note: Docstring text that the annotation overrides.

    Returns:
        A forecast.
    """
    return f"{location.city}:{unit.value}:{days}"


def parameters_of(func: Any) -> dict[str, Any]:
    return Tool(func).parameters


# -- schema ------------------------------------------------------------------------------


def test_schema_of_a_typical_signature() -> None:
    tool = Tool(get_weather)
    schema = tool.schema
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "get_weather" == tool.name
    assert function["description"] == "Look up the weather for a place." == tool.description
    params = function["parameters"]
    assert params == tool.parameters
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert params["required"] == ["location"]
    assert "title" not in params
    props = params["properties"]
    assert list(props) == [
        "location",
        "unit",
        "days",
        "detail",
        "tags",
        "extra",
        "verbose",
        "note",
    ]
    assert all("title" not in p for p in props.values())

    assert props["location"]["description"] == "Where to look."
    assert props["location"]["$ref"] == "#/$defs/Location"
    location = params["$defs"]["Location"]
    assert location["required"] == ["city"]
    assert location["properties"]["country"]["default"] == "NL"

    assert props["unit"]["description"] == "Temperature unit, either scale."
    assert props["unit"]["default"] == "celsius"
    assert params["$defs"]["Unit"]["enum"] == ["celsius", "fahrenheit"]

    assert props["days"] == {"type": "integer", "default": 1, "description": "How many days."}
    assert props["detail"] == {"type": "string", "enum": ["short", "long"], "default": "short"}
    assert props["tags"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert props["tags"]["default"] is None
    assert props["extra"]["anyOf"][0] == {
        "type": "object",
        "additionalProperties": {"type": "number"},
    }
    assert props["verbose"] == {"type": "boolean", "default": False}
    assert props["note"]["description"] == "from the annotation"


def test_rest_docstring_and_overrides() -> None:
    def search(query: str, limit: int = 5) -> list[str]:
        """Search the index.

        :param query: Words to find,
            any order.
        :param int limit: At most this many.
        :returns: matches
        """
        return []

    tool = Tool.from_function(search, timeout=3)
    assert tool.description == "Search the index."
    assert tool.timeout == 3
    props = tool.parameters["properties"]
    assert props["query"]["description"] == "Words to find, any order."
    assert props["limit"]["description"] == "At most this many."

    renamed = Tool(search, name="find", description="Find things.")
    assert renamed.schema["function"]["name"] == "find"
    assert renamed.schema["function"]["description"] == "Find things."


def test_from_function_is_declared_with_the_constructors_parameters() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    declared = inspect.signature(Tool.from_function).parameters
    assert list(declared) == list(inspect.signature(Tool).parameters)
    tool = Tool.from_function(func=add, name="plus", description="Adds.")
    assert (tool.name, tool.description, tool.func) == ("plus", "Adds.", add)
    with pytest.raises(TypeError, match="unexpected keyword argument 'timout'"):
        Tool.from_function(add, timout=3)  # type: ignore[call-arg]


def test_parameters_without_docstring_or_annotations() -> None:
    def plain(a, b=2, c="x", d=None):  # type: ignore[no-untyped-def]
        return a

    params = parameters_of(plain)
    assert params["required"] == ["a"]
    assert params["properties"]["a"] == {}
    assert params["properties"]["b"] == {"type": "integer", "default": 2}
    assert params["properties"]["c"] == {"type": "string", "default": "x"}
    assert Tool(plain).description == ""


def test_parameter_names_that_clash_with_pydantic_attributes() -> None:
    def clash(json: int, schema: str = "s", model_dump: int = 0, _private: int = 1) -> int:
        return json

    params = parameters_of(clash)
    assert list(params["properties"]) == ["json", "schema", "model_dump", "_private"]
    tool = Tool(clash)
    assert tool.validate({"json": 1, "_private": 7}) == {"json": 1, "_private": 7}


def test_schema_is_a_fresh_copy() -> None:
    tool = Tool(get_weather)
    tool.schema["function"]["parameters"]["properties"].clear()
    tool.parameters["required"].append("days")
    assert "location" in tool.parameters["properties"]
    assert tool.parameters["required"] == ["location"]
    assert tool.arguments_model is tool.arguments_model


class Holder:
    def method(self, x: int) -> int:
        return x


@pytest.mark.parametrize(
    ("func", "fragment"),
    [
        (lambda *args: None, "*args"),
        (lambda **kwargs: None, "**kwargs"),
        (Holder.method, "'self'"),
    ],
    ids=["varargs", "varkw", "unbound-method"],
)
def test_unsupported_signatures_are_rejected(func: Any, fragment: str) -> None:
    with pytest.raises(ToolError, match=r"not supported|unbound method") as info:
        Tool(func, name="bad")
    assert fragment in str(info.value)


def test_bound_method_is_fine() -> None:
    tool = Tool(Holder().method)
    assert tool.name == "method"
    assert list(tool.parameters["properties"]) == ["x"]


def test_invalid_construction_is_rejected() -> None:
    with pytest.raises(ToolError, match=r"name=..."):
        Tool(lambda: None)
    with pytest.raises(ToolError, match="invalid tool name 'has space'"):
        Tool(get_weather, name="has space")
    with pytest.raises(ToolError, match="callable"):
        Tool(42)  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="timeout"):
        Tool(get_weather, timeout=0)
    with pytest.raises(ToolError, match="timeout"):
        Tool(get_weather, timeout="soon")  # type: ignore[arg-type]


def test_generator_functions_are_rejected() -> None:
    def numbers() -> Iterator[int]:
        yield 1

    with pytest.raises(ToolError, match="generator"):
        Tool(numbers)


def test_unresolvable_annotation_is_reported() -> None:
    def broken(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(ToolError, match=r"broken.*signature"):
        Tool(broken)


def test_type_without_a_schema_is_reported() -> None:
    class Opaque:
        pass

    def takes(x: Opaque) -> None:
        pass

    takes.__annotations__["x"] = Opaque  # resolved already; no string lookup needed
    with pytest.raises(ToolError, match="takes"):
        Tool(takes)


# -- validation --------------------------------------------------------------------------


def make_recording_tool() -> tuple[Tool, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    def record(count: int, location: Location, label: str = "x") -> int:
        calls.append({"count": count, "location": location, "label": label})
        return count

    return Tool(record), calls


@pytest.mark.parametrize(
    ("arguments", "field", "fragment"),
    [
        ({"location": {"city": "A"}}, "count", "missing"),
        ({"count": "many", "location": {"city": "A"}}, "count", "integer"),
        ({"count": 1, "location": {"city": "A"}, "colour": "red"}, "colour", "count, location"),
        ({"count": 1, "location": {"country": "BE"}}, "location.city", "missing"),
        ({"count": 1, "location": "Amsterdam"}, "location", "Location"),
    ],
    ids=["missing", "wrong-type", "extra", "nested-missing", "nested-type"],
)
@pytest.mark.anyio  # parametrized async tests need the marker at collection time
async def test_invalid_arguments_raise_before_the_call(
    arguments: dict[str, Any], field: str, fragment: str
) -> None:
    tool, calls = make_recording_tool()
    with pytest.raises(ToolArgumentError) as info:
        await tool.call(arguments)
    error = info.value
    assert error.tool == "record"
    assert error.field == field
    assert f"'{field}'" in str(error)
    assert fragment in str(error)
    assert calls == []


async def test_arguments_must_be_a_mapping() -> None:
    tool, calls = make_recording_tool()
    with pytest.raises(ToolArgumentError, match="expected an object"):
        await tool.call(["count", 1])  # type: ignore[arg-type]
    assert calls == []


async def test_validated_values_are_passed() -> None:
    tool, calls = make_recording_tool()
    result = await tool.call({"count": "3", "location": {"city": "Delft"}})
    assert result == 3
    assert calls == [{"count": 3, "location": Location(city="Delft"), "label": "x"}]
    assert isinstance(calls[0]["location"], Location)


async def test_function_defaults_apply_when_arguments_are_left_out() -> None:
    unset = object()
    seen: list[object] = []

    def pick(x: int, marker: Any = unset) -> None:
        seen.append(marker)

    tool = Tool(pick)
    assert "default" not in tool.parameters["properties"]["marker"]
    assert tool.parameters["required"] == ["x"]
    await tool.call({"x": 1})
    await tool.call({"x": 1, "marker": "given"})
    assert seen == [unset, "given"]


async def test_field_defaults_and_enums() -> None:
    got: list[Any] = []

    def convert(value: float, unit: Unit = Unit.CELSIUS, digits: int = Field(2, ge=0)) -> None:
        got.append((value, unit, digits))

    tool = Tool(convert)
    assert tool.parameters["properties"]["digits"] == {
        "type": "integer",
        "default": 2,
        "minimum": 0,
    }
    await tool.call({"value": 1.5, "unit": "fahrenheit"})
    assert got == [(1.5, Unit.FAHRENHEIT, 2)]
    with pytest.raises(ToolArgumentError) as info:
        await tool.call({"value": 1, "digits": -1})
    assert info.value.field == "digits"


async def test_positional_only_parameters() -> None:
    def power(base: int, exponent: int = 2, /, *, negate: bool = False) -> int:
        result: int = base**exponent
        return -result if negate else result

    tool = Tool(power)
    assert await tool.call({"base": 3}) == 9
    assert await tool.call({"base": 2, "exponent": 3, "negate": True}) == -8


# -- execution ---------------------------------------------------------------------------


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    def where() -> int:
        return threading.get_ident()

    tool = Tool(where)
    assert tool.is_async is False
    assert await tool.call({}) != threading.get_ident()


async def test_async_tool_is_awaited_on_the_running_backend(
    anyio_backend: tuple[str, dict[str, object]],
) -> None:
    async def which(delay_checkpoints: int) -> dict[str, Any]:
        for _ in range(delay_checkpoints):
            await anyio.lowlevel.checkpoint()
        return {"library": sniffio.current_async_library(), "thread": threading.get_ident()}

    tool = Tool(which)
    assert tool.is_async is True
    result = await tool.call({"delay_checkpoints": 3})
    assert result == {"library": anyio_backend[0], "thread": threading.get_ident()}


async def test_partial_and_callable_objects() -> None:
    async def add(x: int, y: int) -> int:
        return x + y

    partial_tool = Tool(functools.partial(add, y=10))
    assert partial_tool.name == "add"
    assert partial_tool.is_async is True
    assert partial_tool.parameters["required"] == ["x"]
    assert await partial_tool.call({"x": 1}) == 11

    class Doubler:
        """Doubles a number."""

        async def __call__(self, n: int) -> int:
            return 2 * n

    object_tool = Tool(Doubler(), name="double")
    assert object_tool.is_async is True
    assert object_tool.description == "Doubles a number."
    assert await object_tool.call({"n": 4}) == 8


async def test_tool_exceptions_propagate_unchanged() -> None:
    class Boom(Exception):
        pass

    async def explode() -> None:
        raise Boom("bad")

    def explode_sync() -> None:
        raise Boom("bad sync")

    with pytest.raises(Boom, match="bad"):
        await Tool(explode).call({})
    with pytest.raises(Boom, match="bad sync"):
        await Tool(explode_sync).call({})


async def test_async_tool_timeout() -> None:
    never = anyio.Event()

    async def wait_forever() -> None:
        await never.wait()

    tool = Tool(wait_forever, timeout=0.05)
    with pytest.raises(ToolTimeoutError) as info:
        await tool.call({})
    assert "'wait_forever'" in str(info.value)
    assert "0.05s" in str(info.value)
    assert isinstance(info.value, TimeoutError)


async def test_sync_tool_timeout_abandons_the_thread() -> None:
    release = threading.Event()
    finished = threading.Event()

    def block() -> None:
        release.wait(60)
        finished.set()

    tool = Tool(block, timeout=0.05)
    try:
        with pytest.raises(ToolTimeoutError, match="'block'"):
            await tool.call({})
        assert not finished.is_set()
    finally:
        release.set()


async def test_timeout_not_reached_returns_result() -> None:
    async def quick(x: int) -> int:
        await anyio.lowlevel.checkpoint()
        return x

    assert await Tool(quick, timeout=60).call({"x": 5}) == 5


async def test_outer_cancellation_is_not_a_timeout() -> None:
    started = anyio.Event()
    never = anyio.Event()
    outcome: list[str] = []

    async def wait_forever() -> None:
        started.set()
        await never.wait()

    tool = Tool(wait_forever, timeout=60)

    async def run() -> None:
        try:
            await tool.call({})
        except ToolTimeoutError:
            outcome.append("timeout")
        except anyio.get_cancelled_exc_class():
            outcome.append("cancelled")
            raise

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        tg.cancel_scope.cancel()
    assert outcome == ["cancelled"]


# -- registry ----------------------------------------------------------------------------


def alpha(x: int) -> int:
    """First tool."""
    return x


def beta(y: str) -> str:
    """Second tool."""
    return y


def test_registry_register_get_remove() -> None:
    registry = ToolRegistry()
    tool_a = registry.register(alpha)
    assert isinstance(tool_a, Tool)
    tool_b = registry.register(Tool(beta, name="b"))
    assert registry.names == ("alpha", "b")
    assert len(registry) == 2
    assert list(registry) == ["alpha", "b"]  # names, as iterating upstream's dict
    assert list(registry.values()) == [tool_a, tool_b]
    assert registry["b"] is tool_b
    assert registry.get("alpha") is tool_a
    assert "alpha" in registry
    assert tool_b in registry
    assert Tool(beta, name="b") not in registry
    assert 3 not in registry
    assert registry.remove("alpha") is tool_a
    assert list(registry.names) == ["b"]
    with pytest.raises(ToolNotFoundError, match="'alpha'"):
        registry.remove("alpha")


def test_registry_duplicates_and_update() -> None:
    registry = ToolRegistry([alpha])
    with pytest.raises(DuplicateToolError, match=r"'alpha'.*update=True"):
        registry.register(alpha)
    replacement = Tool(beta, name="alpha")
    assert registry.register(replacement, update=True) is replacement
    assert registry.get("alpha") is replacement
    assert registry.names == ("alpha",)


def test_register_many_is_all_or_nothing() -> None:
    registry = ToolRegistry()
    with pytest.raises(DuplicateToolError):
        registry.register_many([alpha, beta, Tool(beta)])
    assert len(registry) == 0
    with pytest.raises(ToolError):
        registry.register_many([alpha, lambda *a: None])
    assert len(registry) == 0
    tools = registry.register_many([alpha, beta])
    assert [t.name for t in tools] == ["alpha", "beta"]
    with pytest.raises(DuplicateToolError):
        registry.register_many([Tool(alpha, name="gamma"), alpha])
    assert registry.names == ("alpha", "beta")


def test_registry_not_found_lists_names() -> None:
    registry = ToolRegistry([alpha, beta])
    with pytest.raises(ToolNotFoundError) as info:
        registry.get("gamma")
    message = str(info.value)
    assert "'gamma'" in message
    assert "'alpha'" in message
    assert "'beta'" in message
    with pytest.raises(ToolNotFoundError, match=r"\(none\)"):
        ToolRegistry().get("x")


def test_registry_schemas() -> None:
    registry = ToolRegistry([alpha, beta])
    all_schemas = registry.schemas()
    assert [s["function"]["name"] for s in all_schemas] == ["alpha", "beta"]
    assert all_schemas[0] == Tool(alpha).schema
    assert [s["function"]["name"] for s in registry.schemas(["beta", "alpha"])] == [
        "beta",
        "alpha",
    ]
    assert registry.schemas([]) == ()
    with pytest.raises(ToolNotFoundError):
        registry.schemas(["alpha", "missing"])


def test_registry_copy_is_independent() -> None:
    registry = ToolRegistry([alpha])
    other = registry.copy()
    other.register(beta)
    other.remove("alpha")
    assert registry.names == ("alpha",)
    assert other.names == ("beta",)


# -- jsonable ----------------------------------------------------------------------------


@dataclasses.dataclass
class Reading:
    when: dt.datetime
    values: tuple[float, ...]
    unit: Unit
    where: Location


def test_jsonable_converts_common_types() -> None:
    when = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    reading = Reading(when=when, values=(1.5, 2.0), unit=Unit.CELSIUS, where=Location(city="A"))
    uid = UUID("12345678-1234-5678-1234-567812345678")
    assert jsonable(reading) == {
        "when": "2024-05-01T12:30:00Z",
        "values": [1.5, 2.0],
        "unit": "celsius",
        "where": {"city": "A", "country": "NL"},
    }
    assert jsonable({"id": uid, 1: {3, 1, 2}, Unit.CELSIUS: frozenset(), None: True}) == {
        "id": str(uid),
        "1": [1, 2, 3],
        "celsius": [],
        "None": True,
    }
    assert jsonable(Location(city="B")) == {"city": "B", "country": "NL"}
    assert jsonable(dt.date(2024, 1, 2)) == "2024-01-02"
    assert jsonable(Decimal("1.25")) == "1.25"
    assert jsonable(float("nan")) is None
    assert jsonable([None, True, 3, "s", 2.5]) == [None, True, 3, "s", 2.5]


def test_jsonable_rejects_unknown_types() -> None:
    class Opaque:
        pass

    with pytest.raises(ToolError, match="Opaque"):
        jsonable({"nested": [Opaque()]})
    assert jsonable({(1, 2): "tuple key"}) == {"1,2": "tuple key"}


def test_jsonable_rejects_cycles() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ToolError, match="circular"):
        jsonable(loop)
    shared = [1]
    assert jsonable([shared, shared]) == [[1], [1]]
