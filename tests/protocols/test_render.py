"""Rendering history into OpenAI and Anthropic request messages."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lionagi.errors import ConfigurationError
from lionagi.protocols._render import (
    complete_tool_calls,
    instruction_text,
    schema_instruction,
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
from lionagi.service.providers._anthropic_render import anthropic_tool, to_anthropic_messages
from lionagi.service.providers._openai_render import to_openai_messages

SCHEMA = {"title": "Answer", "type": "object", "properties": {"value": {"type": "integer"}}}


def request(call_id: str, name: str = "add", **arguments: Any) -> ActionRequest:
    return ActionRequest(call_id=call_id, function=name, arguments=arguments)


def response(req: ActionRequest, output: Any, *, is_error: bool = False) -> ActionResponse:
    return ActionResponse(
        request_id=req.id,
        call_id=req.call_id,
        function=req.function,
        output=output,
        is_error=is_error,
    )


# -- instruction text ----------------------------------------------------------------------


def test_instruction_text_parts_in_order() -> None:
    ins = Instruction(
        instruction="Sum the numbers.",
        guidance="Show only the result.",
        context={"numbers": [1, 2], "note": "naïve"},
        response_format=SCHEMA,
    )

    text = instruction_text(ins)

    assert text == (
        "Sum the numbers.\n\n"
        "Guidance: Show only the result.\n\n"
        "Context:\n"
        '{\n  "numbers": [\n    1,\n    2\n  ],\n  "note": "naïve"\n}\n\n'
        + schema_instruction(SCHEMA)
    )
    assert ins.render_text() == text
    same = Instruction(
        instruction="Sum the numbers.",
        guidance="Show only the result.",
        context={"numbers": [1, 2], "note": "naïve"},
        response_format=SCHEMA,
    )
    assert instruction_text(same) == text  # deterministic across equal messages


def test_schema_paragraph_is_compact_json() -> None:
    paragraph = schema_instruction(SCHEMA)
    assert "one JSON object" in paragraph or "single JSON object" in paragraph
    assert paragraph.endswith(json.dumps(SCHEMA, separators=(",", ":")))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"instruction": "Hi"}, "Hi"),
        ({"context": "plain text context"}, "Context:\nplain text context"),
        ({"instruction": "Hi", "context": 3}, "Hi\n\nContext:\n3"),
        ({"guidance": "Be kind"}, "Guidance: Be kind"),
        ({}, ""),
    ],
)
def test_instruction_text_variants(fields: dict[str, Any], expected: str) -> None:
    assert instruction_text(Instruction(**fields)) == expected


# -- OpenAI --------------------------------------------------------------------------------


def test_openai_basic_roles_and_images() -> None:
    messages: list[Message] = [
        System(content="sys"),
        Instruction(instruction="look", images=("https://x/a.png", "data:image/png;base64,AA==")),
        AssistantResponse(content="a cat"),
        Instruction(instruction="thanks"),
    ]

    assert to_openai_messages(messages) == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
            ],
        },
        {"role": "assistant", "content": "a cat"},
        {"role": "user", "content": "thanks"},
    ]


def test_openai_folds_action_requests_into_the_assistant_message() -> None:
    first, second = request("c1", a=1, b=2), request("c2", name="now")
    later = request("c3", name="again")
    messages: list[Message] = [
        Instruction(instruction="go"),
        AssistantResponse(content="calling"),
        first,
        second,
        response(first, 3),
        response(second, {"time": "noon"}),
        later,  # follows a tool message: opens its own assistant message
        response(later, "done", is_error=True),
    ]

    rendered = to_openai_messages(messages)

    assert rendered == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "now", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": "c2", "content": '{"time": "noon"}'},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "again", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "done"},
    ]


def test_openai_request_at_the_start_opens_an_assistant_message() -> None:
    req = request("c1")
    rendered = to_openai_messages([req])
    assert rendered[0] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
        ],
    }
    # the call has no result in the history: the request carries an error result for it
    assert rendered[1]["role"] == "tool"
    assert rendered[1]["tool_call_id"] == "c1"
    assert rendered[1]["content"].startswith("error: no result")


def test_unanswered_tool_calls_get_an_error_result_where_results_belong() -> None:

    history = [
        AssistantResponse(content="Working."),
        request("c1"),
        request("c2"),
        ActionResponse(request_id=uuid4(), call_id="c1", function="add", output=3),
        Instruction(instruction="next"),
    ]
    roles = [(m["role"], m.get("tool_call_id")) for m in to_openai_messages(history)]
    assert roles == [("assistant", None), ("tool", "c1"), ("tool", "c2"), ("user", None)]
    _, turns = to_anthropic_messages(history)
    results = [b for b in turns[1]["content"] if b["type"] == "tool_result"]
    assert [(b["tool_use_id"], b["is_error"]) for b in results] == [("c1", False), ("c2", True)]
    assert len(history) == 5  # the history itself is untouched


def test_openai_folding_never_mutates_cached_parts() -> None:
    assistant = AssistantResponse(content="calling")
    req = request("c1")
    folded = to_openai_messages([assistant, req])
    snapshot = copy.deepcopy(folded)

    alone = to_openai_messages([assistant])
    again = to_openai_messages([assistant, req, request("c2")])

    assert alone == [{"role": "assistant", "content": "calling"}]
    assert folded == snapshot
    assert [c["id"] for c in again[0]["tool_calls"]] == ["c1", "c2"]
    assert to_openai_messages([assistant, req]) == snapshot


# -- Anthropic -----------------------------------------------------------------------------


def test_anthropic_system_images_and_alternation() -> None:
    first = request("t1", a=1)
    messages: list[Message] = [
        System(content="sys one"),
        System(content="sys two"),
        Instruction(instruction="look", images=("https://x/a.png", "data:image/png;base64,AA==")),
        AssistantResponse(content="calling"),
        first,
        response(first, {"sum": 1}, is_error=True),
        Instruction(instruction="and?"),
    ]

    system, rendered = to_anthropic_messages(messages)

    assert system == "sys one\n\nsys two"
    assert rendered == [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
                },
                {"type": "text", "text": "look"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": '{"sum": 1}',
                    "is_error": True,
                },
                {"type": "text", "text": "and?"},
            ],
        },
    ]


def test_anthropic_without_system_and_empty_assistant_text() -> None:
    req = request("t1")
    system, rendered = to_anthropic_messages(
        [Instruction(instruction="go"), AssistantResponse(content=""), req, response(req, "ok")]
    )

    assert system is None
    assert [m["role"] for m in rendered] == ["user", "assistant", "user"]
    assert rendered[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "add", "input": {}}]


def test_anthropic_rejects_an_unusable_image() -> None:
    with pytest.raises(ConfigurationError, match="data: URL"):
        to_anthropic_messages([Instruction(instruction="x", images=("file:///tmp/a.png",))])


def test_anthropic_merging_never_mutates_cached_parts() -> None:
    a, b = Instruction(instruction="a"), Instruction(instruction="b")
    merged = to_anthropic_messages([a, b])[1]
    snapshot = copy.deepcopy(merged)

    assert to_anthropic_messages([a])[1] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}]}
    ]
    assert to_anthropic_messages([a, b, Instruction(instruction="c")])[1][0]["content"][2] == {
        "type": "text",
        "text": "c",
    }
    assert merged == snapshot
    assert to_anthropic_messages([a, b])[1] == snapshot


def test_tool_specs_read_wrapped_and_bare_schemas_and_render_for_anthropic() -> None:
    params = {"type": "object", "properties": {"x": {"type": "integer"}}}
    tools: list[dict[str, Any]] = [
        {"type": "function", "function": {"name": "f", "description": "F.", "parameters": params}},
        {"name": "g"},
    ]

    assert [anthropic_tool(ToolSpec.of(tool)) for tool in tools] == [
        {"name": "f", "description": "F.", "input_schema": params},
        {"name": "g", "input_schema": {"type": "object", "properties": {}}},
    ]
    with pytest.raises(ConfigurationError, match="function name"):
        ToolSpec.of({"type": "function", "function": {}})


# -- memoization ---------------------------------------------------------------------------


def long_history(turns: int) -> list[Message]:
    messages: list[Message] = [System(content="sys")]
    for i in range(turns):
        req = request(f"c{i}", n=i)
        messages += [
            Instruction(instruction=f"q{i}", context={"i": i}),
            AssistantResponse(content=f"a{i}"),
            req,
            response(req, i),
        ]
    return messages


def test_rendering_twice_gives_equal_output_from_the_cache() -> None:
    messages = long_history(1000)  # 4,001 messages

    openai_first = to_openai_messages(messages)
    anthropic_first = to_anthropic_messages(messages)
    openai_again = to_openai_messages(messages)
    anthropic_again = to_anthropic_messages(messages)

    assert openai_again == openai_first
    assert anthropic_again == anthropic_first
    assert len(openai_first) == 1 + 4 * 1000 - 1000  # requests fold into assistant messages
    # the second render is assembled from the memoized parts, not rebuilt
    assert openai_again[1] is messages[1]._render_cache["openai"]
    assert openai_again[2]["tool_calls"][0] is messages[3]._render_cache["openai"]


def test_cached_parts_are_what_gets_rendered() -> None:
    ins = Instruction(instruction="real")
    to_openai_messages([ins])
    ins._render_cache["openai"] = {"role": "user", "content": "from cache"}

    assert to_openai_messages([ins]) == [{"role": "user", "content": "from cache"}]


# -- properties ----------------------------------------------------------------------------

_kinds = st.lists(st.sampled_from(["user", "assistant", "request", "response"]), max_size=30)


def build(kinds: list[str]) -> list[Message]:
    messages: list[Message] = []
    for i, kind in enumerate(kinds):
        if kind == "user":
            messages.append(Instruction(instruction=f"u{i}"))
        elif kind == "assistant":
            messages.append(AssistantResponse(content=f"a{i}"))
        elif kind == "request":
            messages.append(request(f"c{i}"))
        else:
            messages.append(response(request(f"c{i}"), i))
    return messages


@given(_kinds)
def test_anthropic_roles_always_alternate(kinds: list[str]) -> None:
    messages = build(kinds)
    _, rendered = to_anthropic_messages(messages)

    roles = [m["role"] for m in rendered]
    assert all(a != b for a, b in itertools.pairwise(roles))
    # every message, plus an error result for each call the history leaves unanswered
    assert sum(len(m["content"]) for m in rendered) == len(complete_tool_calls(messages))


@given(_kinds)
def test_openai_keeps_every_message_in_order(kinds: list[str]) -> None:
    messages = build(kinds)
    rendered = to_openai_messages(messages)

    flat: list[str] = []
    for item in rendered:
        if item["role"] != "assistant" or item["content"] != "":  # made-up ones are empty
            flat.append(item["role"])
        flat.extend("request" for _ in item.get("tool_calls", ()))
    names = {
        Instruction: "user",
        AssistantResponse: "assistant",
        ActionRequest: "request",
        ActionResponse: "tool",
    }
    expected = [names[type(m)] for m in complete_tool_calls(messages)]
    assert flat == expected
    assert [m for m in complete_tool_calls(messages) if m in messages] == messages


def test_instruction_text_lists_tool_schemas_for_json_protocol_models() -> None:
    from lionagi.protocols._render import instruction_text

    schema = {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "Multiply two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
        },
    }
    text = instruction_text(Instruction(instruction="compute", tool_schemas=(schema,)))
    assert "multiply: Multiply two numbers." in text
    assert '"a":{"type":"number"}' in text
    assert text.startswith("compute")
