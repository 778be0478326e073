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
