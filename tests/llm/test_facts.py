"""What nixx reads of a backend's own words: the context length a refusal names, and the
shapes llama.cpp, Ollama and vLLM describe a model in."""

from __future__ import annotations

import pytest

from nixx.llm.facts import context_from_error, from_models, from_props, from_show, is_overflow


@pytest.mark.parametrize(
    "message, length",
    [
        # OpenAI, vLLM and llama-cpp-python
        ("This model's maximum context length is 4096 tokens. However, you requested 4134 "
         "tokens (3622 in the messages, 512 in the completion).", 4096),
        # llama.cpp's server, as nixx's client words its error body
        ("the request exceeds the available context size, try increasing it (n_ctx 2048)", 2048),
        ('{"error": {"type": "exceed_context_size_error", "n_ctx": 8192}}', 8192),
    ],
)
def test_a_refusal_names_the_context(message: str, length: int) -> None:
    assert context_from_error(message) == length
    assert is_overflow(message)


def test_other_errors_name_no_context() -> None:
    assert context_from_error("model exploded") is None
    assert not is_overflow("rate limited: 4096 requests per minute")
    # an overflow that names no length is still one
    assert is_overflow("the request exceeds the available context size, try increasing it")


def test_the_shapes_of_each_backend() -> None:
    props = from_props({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2})
    assert props is not None and (props.context_length, props.slots) == (4096, 2)
    assert from_props({"build_info": "b1"}) is None
    vllm = from_models({"data": [{"id": "a", "max_model_len": 32768},
                                 {"id": "b", "max_model_len": 4096}]}, "b")
    assert vllm is not None and vllm.context_length == 4096
    assert from_models({"data": [{"id": "a"}]}, "a") is None
    # llama-cpp-python's own model list (`python -m llama_cpp.server`): one slot
    lcp = from_models({"object": "list", "data": [
        {"id": "/m/SmolLM2.gguf", "object": "model", "owned_by": "me", "permissions": []}]}, "x")
    assert lcp is not None and (lcp.context_length, lcp.slots) == (None, 1)
    assert from_models({"data": [{"id": "a", "owned_by": "me"}]}, "a") is None
    ollama = from_show({"model_info": {"gemma3.context_length": 131072},
                        "parameters": "stop <end>\nnum_ctx 8192"})
    assert ollama is not None and ollama.context_length == 8192
    assert from_show({"model_info": {"general.architecture": "llama"}}) is None


def test_whether_each_backend_parses_tool_calls() -> None:
    """None: the backend did not say (taken as yes); False: a call would come back as text."""
    caps = {"supports_tools": True, "supports_tool_calls": False}
    props = from_props({"default_generation_settings": {"n_ctx": 4096}, "chat_template_caps": caps})
    assert props is not None and (props.context_length, props.tool_calls) == (4096, False)
    assert props.tool_calls_source == "llama.cpp /props chat_template_caps"
    # capabilities alone are worth keeping; `supports_tools` when the other is missing
    only = from_props({"chat_template_caps": {"supports_tools": True}})
    assert only is not None and (only.context_length, only.tool_calls) == (None, True)
    plain = from_props({"default_generation_settings": {"n_ctx": 4096}})
    assert plain is not None and plain.tool_calls is None
    lcp = from_models({"data": [{"id": "m", "owned_by": "me", "permissions": []}]}, "m")
    assert lcp is not None and (lcp.tool_calls, lcp.tool_calls_source) == (False,
                                                                          "llama-cpp-python")
    vllm = from_models({"data": [{"id": "a", "max_model_len": 32768}]}, "a")
    assert vllm is not None and vllm.tool_calls is None
    tools = from_show({"capabilities": ["completion", "tools"],
                       "model_info": {"qwen3.context_length": 40960}})
    assert tools is not None and (tools.context_length, tools.tool_calls) == (40960, True)
    none = from_show({"capabilities": ["completion", "vision"]})
    assert none is not None and (none.context_length, none.tool_calls) == (None, False)
    older = from_show({"model_info": {"gemma3.context_length": 8192}})  # no capabilities
    assert older is not None and older.tool_calls is None
