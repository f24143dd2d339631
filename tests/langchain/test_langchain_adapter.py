"""ChatHammer's own logic on a scripted backend: conversions at the edge, streaming, refusals, async.

No model here: ``ScriptedBackend`` replays answers and records the prompts, grammars and settings
the engine sent, so these tests pin what the adapter passes and what it builds from the answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_hammer import ChatHammer, to_engine_messages
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from hammer_plugins import HammerEngine, ModelNotFoundError, RefusalError, UnknownToolError
from hammer_plugins.backends.scripted import ScriptedBackend


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


def call(tool_name: str, /, **args: Any) -> dict[str, Any]:
    return {"name": tool_name, "arguments": args}


def answer(*calls: dict[str, Any]) -> str:
    """The answer as Hammer writes it: a fenced JSON list of calls."""
    return "```\n" + json.dumps(list(calls), ensure_ascii=False) + "\n```"


def chat(*answers: str, responder: Callable[[str], str] | None = None,
         **kwargs: Any) -> tuple[ChatHammer, ScriptedBackend]:
    backend = ScriptedBackend(list(answers), responder=responder)
    return ChatHammer(backend=backend, **kwargs), backend


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    return full


def same_calls(streamed: BaseMessage, invoked: AIMessage) -> None:
    """Streamed and invoked messages carry the same calls (ids aside: each run mints its own)."""
    assert isinstance(streamed, AIMessage)

    def strip(calls: list[Any]) -> list[tuple[Any, ...]]:
        return [(c["name"], c["args"]) for c in calls]

    assert strip(streamed.tool_calls) == strip(invoked.tool_calls)
    # LangChain rebuilds streamed invalid calls from their chunks, so only names survive the trip.
    assert [c["name"] for c in streamed.invalid_tool_calls] == [c["name"] for c in invoked.invalid_tool_calls]
    assert streamed.content == invoked.content


# ----------------------------------------------------------------- construction
def test_construction_is_lazy_and_errors_surface_on_first_call() -> None:
    llm = ChatHammer(model_path="/nowhere/hammer2.1-1.5b.Q4_K_M.gguf")  # no file: fine until used
    assert llm._get_ls_params()["ls_model_name"] == "/nowhere/hammer2.1-1.5b.Q4_K_M.gguf"
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        llm.invoke("hi")


def test_remote_only_parameters_warn_instead_of_vanishing() -> None:
    with pytest.warns(UserWarning, match=r"ignores \['api_key', 'timeout'\] unless backend='server'"):
        llm = ChatHammer(api_key="x", timeout=3, max_tokens=7)
    assert llm.max_tokens == 7
    with pytest.warns(UserWarning, match=r"ignores \['organization'\]"):
        ChatHammer(organization="acme")


def test_server_settings_reach_the_server_backend() -> None:
    from hammer_plugins.backends.remote import OpenAICompatibleBackend

    llm = ChatHammer(backend="server", base_url="http://127.0.0.1:9/v1", api_key="k", timeout=7, max_retries=0,
                     model="hammer")
    backend = llm._engine().backend  # built lazily, nothing contacted yet
    assert isinstance(backend, OpenAICompatibleBackend)
    assert backend.base_url == "http://127.0.0.1:9"
    assert backend.settings.timeout == 7 and backend.settings.max_retries == 0
    assert backend.settings.api_key is not None and backend.settings.api_key.get_secret_value() == "k"


def test_invalid_options_are_rejected_at_construction() -> None:
    with pytest.raises(ValueError, match="on_refusal"):
        ChatHammer(on_refusal="shrug")


def test_unknown_call_arguments_raise() -> None:
    llm, _ = chat("hi")
    with pytest.raises(TypeError, match="frobnicate"):
        llm.invoke("hi", frobnicate=True)


def test_ls_params_report_provider_model_and_per_call_override() -> None:
    llm = ChatHammer(model_path="h.gguf", temperature=0.2, max_tokens=9, stop=["x"])
    params = llm._get_ls_params()
    assert (params["ls_provider"], params["ls_model_name"], params["ls_temperature"], params["ls_max_tokens"],
            params["ls_stop"]) == ("hammer", "h.gguf", 0.2, 9, ["x"])
    assert llm._get_ls_params(model="other.gguf")["ls_model_name"] == "other.gguf"


def test_identifying_params_tell_apart_every_setting_that_builds_another_engine_and_hold_no_key() -> None:
    base = ChatHammer(backend="server", base_url="http://127.0.0.1:1/v1", api_key="sk-secret")
    changed = {"n_ctx": 2048, "temperature": 0.5, "mask_names": True, "prompt_format": "hammer2.0", "seed": 7,
               "n_threads": 3, "device": "cpu", "loop_guard": False, "max_tool_rounds": 2, "model": "a/b"}
    for name, value in changed.items():
        other = base.model_copy(update={name: value})
        assert other._identifying_params != base._identifying_params, name
        assert (other.build_engine() is base.build_engine()) is False, name  # another engine, another identity
    assert "sk-secret" not in repr(base._identifying_params) and base._identifying_params["backend"] == "server"


# --------------------------------------------------------------- messages in
def test_history_of_every_kind_converts_to_engine_messages() -> None:
    history: list[BaseMessage] = [
        SystemMessage("Be brief."),
        SystemMessage("Use tools."),
        HumanMessage("Wetter in Zürich? 天气"),
        HumanMessage([{"type": "text", "text": "And "}, "Paris"]),
        AIMessage("Checking.", tool_calls=[{"name": "get_weather", "args": {"city": "Zürich"}, "id": "c1"}]),
        ToolMessage("sunny", tool_call_id="c1"),
        AIMessage([{"type": "text", "text": "x"}, {"type": "tool_use", "id": "c2", "name": "get_weather",
                                                   "input": {"city": "Paris"}}],
                  tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c2"}]),
        ToolMessage([{"type": "text", "text": "Error: "}, {"temp": 21}], tool_call_id="c2", status="error"),
        ChatMessage(role="assistant", content="Done."),
    ]
    msgs = to_engine_messages(history)
    assert [m.role for m in msgs] == ["system", "system", "user", "user", "assistant", "tool", "assistant", "tool",
                                      "assistant"]
    assert msgs[2].content == "Wetter in Zürich? 天气"
    assert msgs[3].content == "And Paris"
    assert msgs[4].tool_calls[0].model_dump() == {"name": "get_weather", "arguments": {"city": "Zürich"}, "id": "c1"}
    assert (msgs[5].tool_call_id, msgs[5].is_error) == ("c1", False)  # the engine links it to its call by id
    assert msgs[6].content == "x"  # the tool_use block is the call, already in tool_calls
    assert (msgs[7].content, msgs[7].is_error) == ('Error: {"temp": 21}', True)


def test_history_reaches_the_prompt_with_error_results_marked() -> None:
    history: list[BaseMessage] = [
        HumanMessage("Weather in Zürich?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Zürich"}, "id": "c1"}]),
        ToolMessage("city not found", tool_call_id="c1", status="error"),
    ]
    # Offered the tools again (no round cap): the call in Hammer's layout, the result as a tool turn.
    llm, backend = chat("[]", "Zürich was not found.", max_tool_rounds=None)
    assert llm.bind_tools([get_weather]).invoke(history).content == "Zürich was not found."
    assert '"city": "Zürich"' in backend.prompts[0]
    assert "<|im_start|>tool\nError: city not found<|im_end|>" in backend.prompts[0]
    # The answer pass (and the default one-round cap) tells the call in words, its result a tool turn.
    expected = ('I called get_weather({"city": "Zürich"}), which failed with:<|im_end|>\n'
                "<|im_start|>tool\ncity not found<|im_end|>")
    assert expected in backend.prompts[1]
    llm, backend = chat("Zürich was not found.")
    llm.bind_tools([get_weather]).invoke(history)
    assert len(backend.prompts) == 1 and expected in backend.prompts[0]


def test_media_and_unknown_blocks_raise_a_clear_error() -> None:
    with pytest.raises(ValueError, match="text only"):
        to_engine_messages([HumanMessage([{"type": "image", "base64": "AAAA", "mime_type": "image/png"}])])
    with pytest.raises(ValueError, match="'hologram'"):
        to_engine_messages([HumanMessage([{"type": "hologram", "data": "..."}])])


# --------------------------------------------------------------------- tools
class Multiply(BaseModel):
    """Multiply two integers."""

    a: int = Field(description="first factor")
    b: int = Field(description="second factor")


class Lookup(TypedDict):
    term: Annotated[str, ..., "what to look up"]


def divide(x: float, y: float) -> float:
    """Divide x by y."""
    return x / y


SCHEMA = {"title": "translate", "description": "Translate text.", "type": "object",
          "properties": {"text": {"type": "string"}}, "required": ["text"]}
OPENAI = {"type": "function", "function": {"name": "ping", "description": "Ping a host.",
                                           "parameters": {"type": "object", "properties": {"host": {"type": "string"}}}}}


@pytest.mark.filterwarnings("ignore:This API is in beta")  # Runnable.as_tool
def test_every_tool_kind_is_shown_to_the_model_and_callable() -> None:
    greeter = RunnableLambda(lambda d: "hi " + d["style"]).as_tool(
        name="greet", description="Greet in a style.", arg_types={"style": str})
    tools = [get_weather, Multiply, Lookup, divide, SCHEMA, OPENAI, greeter]
    llm, backend = chat(answer(call("Multiply", a=6, b=7), call("greet", style="pirate")))
    message = llm.bind_tools(tools).invoke("6*7, then greet like a pirate")
    block = backend.prompts[-1].split("[BEGIN OF AVAILABLE TOOLS]\n")[1].split("\n[END OF AVAILABLE TOOLS]")[0]
    shown = json.loads(block)
    assert [t["name"] for t in shown] == ["get_weather", "Multiply", "Lookup", "divide", "translate", "ping", "greet"]
    assert shown[2]["description"] == ""  # not dict's docstring, which LangChain gives an undocumented TypedDict
    assert shown[1]["parameters"]["a"] == {"type": "integer", "description": "first factor", "required": True}
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("Multiply", {"a": 6, "b": 7}),
                                                                    ("greet", {"style": "pirate"})]
    assert len({c["id"] for c in message.tool_calls}) == 2
    assert message.response_metadata["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("tool_choice", "mode"),
    [(None, "auto"), ("auto", "auto"), ("any", "required"), ("required", "required"), (True, "required"),
     ("send_email", "send_email"), ({"type": "function", "function": {"name": "send_email"}}, "send_email")],
)
def test_tool_choice_reaches_the_grammar(tool_choice: Any, mode: str) -> None:
    llm, backend = chat(answer(call("send_email", to="a@b.c", body="hi")))
    llm.bind_tools([get_weather, send_email], tool_choice=tool_choice).invoke("mail a@b.c: hi")
    engine = HammerEngine(backend=ScriptedBackend())
    # A named choice forces one call of that tool (parallel_tool_calls not set); the others allow several.
    parallel = mode in ("auto", "required")
    expected = engine.bind([t for t in llm.bind_tools([get_weather, send_email]).kwargs["tools"]]).grammar(mode, parallel)
    assert backend.grammars[-1] == expected


def test_tool_choice_none_answers_without_tools() -> None:
    llm, backend = chat("Hello there.")
    message = llm.bind_tools([get_weather], tool_choice="none").invoke("hi")
    assert message.content == "Hello there." and not message.tool_calls
    assert backend.grammars[-1] is None and "AVAILABLE TOOLS" not in backend.prompts[-1]


def test_parallel_tool_calls_false_reaches_the_grammar() -> None:
    llm, backend = chat(answer(call("get_weather", city="Paris")))
    llm.bind_tools([get_weather], parallel_tool_calls=False).invoke("Paris?")
    engine = HammerEngine(backend=ScriptedBackend())
    assert backend.grammars[-1] == engine.bind(llm.bind_tools([get_weather]).kwargs["tools"]).grammar("auto", False)


def test_parallel_tool_calls_false_keeps_one_call_without_a_grammar_too() -> None:
    two = answer(call("get_weather", city="Paris"), call("get_weather", city="Rome"))
    llm, _ = chat(two, two, constrained=False)
    single = llm.bind_tools([get_weather], parallel_tool_calls=False).invoke("Paris and Rome?")
    assert [c["args"] for c in single.tool_calls] == [{"city": "Paris"}]
    unset = llm.bind_tools([get_weather]).bind(parallel_tool_calls=None).invoke("Paris and Rome?")
    assert len(unset.tool_calls) == 2  # None is "not set", as in LangChain: parallel calls stay allowed


def test_unknown_tool_choice_fails_at_bind_time() -> None:
    llm, _ = chat()
    with pytest.raises(UnknownToolError, match="get_wether"):
        llm.bind_tools([get_weather], tool_choice="get_wether")


def test_masked_names_come_back_real() -> None:
    def responder(prompt: str) -> str:
        block = prompt.split("[BEGIN OF AVAILABLE TOOLS]\n")[1].split("\n[END OF AVAILABLE TOOLS]")[0]
        masked = json.loads(block)[0]
        return answer({"name": masked["name"], "arguments": {next(iter(masked["parameters"])): "Paris"}})

    llm, backend = chat(responder=responder, mask_names=True)
    message = llm.bind_tools([get_weather]).invoke("Weather in Paris?")
    assert "get_weather" not in backend.prompts[-1]
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]


# ---------------------------------------------------------- refusals, invalid
def test_refusal_is_a_marked_message_without_calls() -> None:
    llm, _ = chat("[]")
    message = llm.bind_tools([get_weather]).invoke("Tell me a joke")
    assert message.tool_calls == [] and message.invalid_tool_calls == []
    assert message.content == "Sorry, no tool is suitable for your request."
    assert message.response_metadata["refusal"] is True
    assert message.response_metadata["output_kind"] == "refusal"
    assert message.response_metadata["raw_output"] == "[]"


def test_refusal_answer_mode_runs_a_second_pass_without_tools() -> None:
    llm, backend = chat("[]", "Why did the cat sit on the computer? To keep an eye on the mouse.", on_refusal="answer")
    message = llm.bind_tools([get_weather]).invoke("Tell me a joke")
    assert message.content.startswith("Why did the cat")
    assert message.response_metadata["refusal"] is True and not message.tool_calls
    assert "AVAILABLE TOOLS" not in backend.prompts[-1]
    assert message.usage_metadata is not None
    assert message.usage_metadata["output_tokens"] > 1  # both passes counted


def test_record_passes_puts_what_the_model_read_in_response_metadata() -> None:
    """``record_passes=True`` (bound or per call): ``response_metadata["passes"]``, each pass as the backend read it,
    as JSON (what LangSmith and message stores keep); invoked and streamed alike, absent when not asked."""
    weather, joke = answer(call("get_weather", city="Paris")), "Why did the cat sit on the computer?"
    llm, backend = chat(weather, "[]", joke, "[]", joke, weather, on_refusal="answer")
    asked = llm.bind_tools([get_weather, send_email], record_passes=True, mask_names=True)
    [done] = asked.invoke("Weather in Paris?").response_metadata["passes"]
    assert done["prompt"] == backend.prompts[-1] and done["offered_tools"] == ["get_weather", "send_email"]
    assert done["shown_names"]["get_weather"] in done["prompt"] and "get_weather" not in done["prompt"]
    refused = asked.invoke("Tell me a joke").response_metadata["passes"]
    assert [(p["stage"], p["offered_tools"]) for p in refused] == [("tools", ["get_weather", "send_email"]),
                                                                   ("answer", [])]
    assert [p["prompt"] for p in refused] == backend.prompts[1:3] and json.loads(json.dumps(refused)) == refused
    streamed = merged(list(asked.stream("Tell me a joke"))).response_metadata["passes"]
    assert [p["prompt"] for p in streamed] == backend.prompts[3:5]  # the last chunk's, once
    assert "passes" not in llm.bind_tools([get_weather]).invoke("Weather in Paris?").response_metadata


def test_usage_metadata_says_how_many_prompt_tokens_the_cache_served() -> None:
    """LangChain's convention: ``input_tokens`` the whole prompt, ``input_token_details["cache_read"]`` the
    part a cache served; invoked and streamed alike."""
    weather = answer(call("get_weather", city="Paris"))
    llm = ChatHammer(backend=ScriptedBackend([weather] * 3, prefix_cache=True)).bind_tools([get_weather])
    cold, warm = llm.invoke("Weather in Paris?"), llm.invoke("Weather in Paris?")
    assert cold.usage_metadata is not None and cold.usage_metadata["input_token_details"]["cache_read"] == 0
    assert warm.usage_metadata is not None and warm.usage_metadata["input_tokens"] == cold.usage_metadata["input_tokens"]
    assert 0.9 * warm.usage_metadata["input_tokens"] < warm.usage_metadata["input_token_details"]["cache_read"] < (
        warm.usage_metadata["input_tokens"])
    streamed = merged(list(llm.stream("Weather in Paris?")))
    assert streamed.usage_metadata == warm.usage_metadata


def test_refusal_raise_mode_and_per_call_override() -> None:
    llm, _ = chat("[]", "[]", on_refusal="raise")
    with pytest.raises(RefusalError):
        llm.bind_tools([get_weather]).invoke("Tell me a joke")
    message = llm.bind_tools([get_weather], on_refusal="message").invoke("Tell me a joke")
    assert message.response_metadata["refusal"] is True


def test_custom_refusal_text() -> None:
    llm, _ = chat("[]", refusal_text="No tool fits.")
    assert llm.bind_tools([get_weather]).invoke("joke").content == "No tool fits."


@pytest.mark.parametrize(
    ("raw", "reason"),
    [('```\n[{"name": "get_weather", "arguments": {"city": "Par', "not complete JSON"),
     (answer(call("get_time", tz="UTC")), "not a bound tool"),
     ('[{"name": "get_weather", "arguments": "city=Paris"}]', "not valid JSON")],
)
def test_malformed_output_becomes_invalid_tool_calls(raw: str, reason: str) -> None:
    llm, _ = chat(raw)
    message = llm.bind_tools([get_weather]).invoke("Weather in Paris?")
    assert message.tool_calls == []
    assert len(message.invalid_tool_calls) == 1 and reason in (message.invalid_tool_calls[0]["error"] or "")
    assert message.response_metadata["output_kind"] == "invalid"


# ----------------------------------------------------------------- streaming
def stream_and_invoke(answer_text: str, tools: list[Any] | None = None,
                      **bind: Any) -> tuple[list[AIMessageChunk], AIMessage]:
    llm, _ = chat(answer_text, answer_text)
    runnable = llm.bind_tools(tools, **bind) if tools else llm.bind(**bind)
    chunks = list(runnable.stream(GIVEN))
    return chunks, runnable.invoke(GIVEN)


# Every value the scripted calls below send (the ask-or-call rule holds a call whose values nobody gave).
GIVEN = "Weather in Paris, Rome and 東京? Then mail a@b: hi"


@pytest.mark.parametrize(
    "raw",
    [answer(call("get_weather", city="Paris"), call("get_weather", city="東京"), call("send_email", to="a@b", body="hi")),
     "[]",
     '```\n[{"name": "get_weather", "arguments": {"city": "Par'],
)
def test_streamed_tool_calls_merge_into_the_calls_of_invoke(raw: str) -> None:
    chunks, invoked = stream_and_invoke(raw, [get_weather, send_email])
    full = merged(chunks)
    same_calls(full, invoked)
    indices = [c["index"] for chunk in chunks for c in chunk.tool_call_chunks]
    assert all(isinstance(i, int) for i in indices) and len(indices) == len(set(indices))
    assert chunks[-1].chunk_position == "last"
    assert sum(1 for c in chunks if c.usage_metadata) == 1
    assert full.usage_metadata == invoked.usage_metadata
    assert full.response_metadata["finish_reason"] == invoked.response_metadata["finish_reason"]


def test_each_call_streams_before_the_answer_ends() -> None:
    chunks, _ = stream_and_invoke(answer(call("get_weather", city="Paris"), call("get_weather", city="Rome")),
                                  [get_weather])
    with_calls = [i for i, c in enumerate(chunks) if c.tool_call_chunks]
    assert len(with_calls) == 2 and with_calls[-1] < len(chunks) - 1  # both before the final chunk


def test_streamed_call_ids_are_the_final_ids() -> None:
    llm, _ = chat(answer(call("get_weather", city="Paris")))
    chunks = list(llm.bind_tools([get_weather]).stream("Weather in Paris?"))
    early = [c for chunk in chunks[:-1] for c in chunk.tool_call_chunks]
    assert [c["id"] for c in early] == [c["id"] for c in merged(chunks).tool_calls]


def test_text_streams_token_by_token_and_matches_invoke() -> None:
    chunks, invoked = stream_and_invoke("  Hello there, how are you?  \n")
    assert len([c for c in chunks if c.content]) > 3
    full = merged(chunks)
    assert full.content == invoked.content == "Hello there, how are you?"
    assert full.response_metadata["model_name"] == "scripted"


def test_streaming_callbacks_see_every_token() -> None:
    class Collect(BaseCallbackHandler):
        def __init__(self) -> None:
            self.tokens: list[str] = []

        def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
            self.tokens.append(token)

    handler = Collect()
    llm, _ = chat("one two three")
    list(llm.stream("q", config={"callbacks": [handler]}))
    assert "".join(handler.tokens) == "one two three"


PROSE = "Why did the cat sit on the computer? To keep an eye on the mouse."


def test_on_refusal_answer_streams_its_prose_live_and_merges_into_invoke() -> None:
    llm, _ = chat("[]", f"  {PROSE}\n", "[]", f"  {PROSE}\n", on_refusal="answer")
    bound = llm.bind_tools([get_weather])
    chunks = list(bound.stream("Tell me a joke"))
    invoked = bound.invoke("Tell me a joke")
    live = [c.content for c in chunks[:-1] if c.content]
    assert len(live) > 5 and "".join(live) == PROSE  # token by token, before the final chunk, trimmed
    assert chunks[-1].content == "" and not any(c.tool_call_chunks for c in chunks)  # "[]" is not content
    full = merged(chunks)
    assert full.content == invoked.content == PROSE
    assert full.response_metadata["refusal"] is invoked.response_metadata["refusal"] is True
    assert full.usage_metadata == invoked.usage_metadata


def test_the_answer_that_ends_an_agent_turn_streams_live() -> None:
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("sunny in Paris", tool_call_id="c1"),
    ]
    llm, _ = chat("It is sunny in Paris today.", "It is sunny in Paris today.")
    bound = llm.bind_tools([get_weather])
    chunks = list(bound.stream(history))
    assert len([c for c in chunks[:-1] if c.content]) > 3
    assert merged(chunks).content == bound.invoke(history).content == "It is sunny in Paris today."


def test_max_tool_rounds_reaches_the_engine() -> None:
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris, then Rome?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("sunny in Paris", tool_call_id="c1"),
    ]
    rome = answer(call("get_weather", city="Rome"))
    # Default (1): after one round of calls the model answers without being offered the tools.
    llm, backend = chat("Sunny in Paris.")
    assert llm.max_tool_rounds == 1 and llm._engine().max_tool_rounds == 1
    assert llm.bind_tools([get_weather]).invoke(history).content == "Sunny in Paris."
    assert backend.grammars == [None] and "AVAILABLE TOOLS" not in backend.prompts[0]
    # The field, passed through: a second round is allowed.
    llm, backend = chat(rome, max_tool_rounds=2)
    assert llm._engine().max_tool_rounds == 2
    second = llm.bind_tools([get_weather]).invoke(history)
    assert [c["args"] for c in second.tool_calls] == [{"city": "Rome"}] and "AVAILABLE TOOLS" in backend.prompts[0]
    # Per call (bound or invoked), None lifts the cap.
    llm, backend = chat(rome, rome)
    assert llm.bind_tools([get_weather], max_tool_rounds=None).invoke(history).tool_calls
    assert llm.bind_tools([get_weather]).invoke(history, max_tool_rounds=None).tool_calls
    assert all("AVAILABLE TOOLS" in p for p in backend.prompts)
    with pytest.raises(ValueError, match="max_tool_rounds"):
        ChatHammer(max_tool_rounds=0)


def test_streaming_flag_routes_invoke_through_stream() -> None:
    llm, _ = chat(answer(call("get_weather", city="Paris")), streaming=True)
    message = llm.bind_tools([get_weather]).invoke("Weather in Paris?")
    assert [c["args"] for c in message.tool_calls] == [{"city": "Paris"}]


# --------------------------------------------------------------- settings
def test_stop_and_sampling_settings_reach_the_backend() -> None:
    llm, backend = chat("a", "b", stop=["x"], temperature=0.3, max_tokens=33)
    llm.invoke("q")
    assert (backend.settings[-1].stop, backend.settings[-1].temperature, backend.settings[-1].max_tokens) == (
        ["x"], 0.3, 33)
    llm.invoke("q", stop=["you"], max_tokens=5, seed=7)
    assert (backend.settings[-1].stop, backend.settings[-1].max_tokens, backend.settings[-1].seed) == (["you"], 5, 7)


def test_changing_a_field_after_a_call_takes_effect() -> None:
    llm, backend = chat("a", "b", max_tokens=40)
    llm.invoke("q")
    llm.max_tokens = 8
    llm.invoke("q")
    assert [s.max_tokens for s in backend.settings] == [40, 8]


def test_usage_and_metadata_on_invoke() -> None:
    llm, _ = chat("Hi there")
    message = llm.invoke("hello")
    assert message.usage_metadata == {"input_tokens": message.usage_metadata["input_tokens"], "output_tokens": 2,
                                      "total_tokens": message.usage_metadata["input_tokens"] + 2,
                                      "input_token_details": {"cache_read": 0}}  # as ChatOpenAI reports it
    assert message.response_metadata["model_provider"] == "hammer"
    assert message.response_metadata["finish_reason"] == "stop"
    assert "raw_output" not in message.response_metadata  # the content is the raw output


def test_cut_off_answer_reports_length() -> None:
    llm, _ = chat("one two three four five", max_tokens=2)
    assert llm.invoke("q").response_metadata["finish_reason"] == "length"


def test_per_call_model_override_reports_that_model() -> None:
    llm, _ = chat("a")
    assert llm.invoke("q", model="other-hammer.gguf").response_metadata["model_name"] == "other-hammer.gguf"


# ------------------------------------------------------------- structured
class Person(BaseModel):
    """A person."""

    name: str
    age: int


class PersonDict(TypedDict):
    name: str
    age: int


PERSON_SCHEMA = {"title": "Person", "type": "object", "properties": {"name": {"type": "string"},
                                                                     "age": {"type": "integer"}},
                 "required": ["name", "age"]}


@pytest.mark.parametrize("schema", [Person, PersonDict, PERSON_SCHEMA])
def test_structured_output_by_function_calling_forces_the_schema_tool(schema: Any) -> None:
    name = "PersonDict" if schema is PersonDict else "Person"
    llm, backend = chat(answer(call(name, name="Anna", age=31)))
    result = llm.with_structured_output(schema).invoke("Anna is 31.")
    expected = Person(name="Anna", age=31) if schema is Person else {"name": "Anna", "age": 31}
    assert result == expected
    engine = HammerEngine(backend=ScriptedBackend())
    tools = llm.bind_tools([schema]).kwargs["tools"]
    assert backend.grammars[-1] == engine.bind(tools).grammar(name, False)


@pytest.mark.parametrize("method", ["json_schema", "json_mode"])
@pytest.mark.parametrize("schema", [Person, PERSON_SCHEMA])
def test_structured_output_by_json_uses_a_json_grammar_without_tools(method: str, schema: Any) -> None:
    llm, backend = chat('{"name": "Anna", "age": 31}')
    result = llm.with_structured_output(schema, method=method, strict=True).invoke("Anna is 31.")
    assert result == (Person(name="Anna", age=31) if schema is Person else {"name": "Anna", "age": 31})
    assert "AVAILABLE TOOLS" not in backend.prompts[-1]
    grammar = backend.grammars[-1]
    assert grammar is not None
    assert ("age" in grammar.gbnf) is (method == "json_schema")  # json_mode: any object; json_schema: this one


def test_structured_output_include_raw_keeps_the_parsing_error() -> None:
    llm, _ = chat('{"name": "Anna"}')
    out = llm.with_structured_output(Person, method="json_schema", include_raw=True).invoke("Anna")
    assert out["parsed"] is None and out["parsing_error"] is not None
    assert isinstance(out["raw"], AIMessage)


def test_structured_output_rejects_unknown_arguments() -> None:
    llm, _ = chat()
    with pytest.raises(ValueError, match="unsupported"):
        llm.with_structured_output(Person, colour="red")
    with pytest.raises(ValueError, match="schema is required"):
        llm.with_structured_output(None)


# --------------------------------------------------------------------- async
async def test_async_invoke_and_stream_do_not_block_the_event_loop(loop_ticker: Any) -> None:
    def slow(prompt: str) -> str:
        time.sleep(0.4)  # a model thinking, in a worker thread
        return answer(call("get_weather", city="Paris"))

    llm, _ = chat(responder=slow)
    bound = llm.bind_tools([get_weather])
    async with loop_ticker(0.02) as ticker:
        message = await bound.ainvoke("Paris?")
        chunks = [c async for c in bound.astream("Paris?")]
    assert ticker.ticks >= 20  # the loop kept running through ~0.8 s of generation
    assert [c["args"] for c in message.tool_calls] == [{"city": "Paris"}]
    same_calls(merged(chunks), message)


async def test_abatch_keeps_order() -> None:
    llm, _ = chat(responder=lambda prompt: "yes" if "first" in prompt else "no")
    results = await llm.abatch(["first", "second"])
    assert [r.content for r in results] == ["yes", "no"]
