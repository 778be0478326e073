"""What a backend says about itself: the model's context length, how many requests it
serves at once (its slots), and whether it turns a model's tool calls back into
``tool_calls`` (nixx offers its own tools only to one that does: `nixx.memory.turn`).

Asked once per model (`probe`, a few quick requests, failures ignored):

- **llama.cpp** (``llama-server``): ``GET /props`` — ``default_generation_settings.n_ctx``
  (the context of one slot) and ``total_slots``;
- **vLLM**: ``GET /v1/models`` — the model's ``max_model_len``;
- **Ollama**: ``POST /api/show`` — ``num_ctx`` among the model's ``parameters`` when its
  Modelfile sets one, else ``model_info["<arch>.context_length"]`` (the model's maximum:
  Ollama itself may run it with less, its ``OLLAMA_CONTEXT_LENGTH``).

llama-cpp-python (``python -m llama_cpp.server``) says no context, but its ``/v1/models``
entries are its own (``"owned_by": "me"``): it serves one request at a time, so that is
its slots (`from_models`).

Tool calls (``tool_calls``; None: the backend did not say, taken as yes):

- **llama.cpp**: ``GET /props`` — ``chat_template_caps.supports_tool_calls`` (else
  ``supports_tools``), what the model's chat template can do (recent versions; older ones
  say nothing);
- **llama-cpp-python**: no — its default chat handler writes the tools into the prompt
  but never parses a call back, so the model's call arrives as text (issue 38); only a
  server started with a function-calling ``--chat_format`` does, and it looks the same;
- **Ollama**: ``POST /api/show`` — ``"tools"`` among the model's ``capabilities``.

A backend that says nothing (llama-cpp-python, an OpenAI-compatible gateway) is learned
from, when it refuses a request for its length: ``This model's maximum context length is
4096 tokens`` (OpenAI, vLLM, llama-cpp-python), or llama.cpp's ``n_ctx`` in its error
(`context_from_error`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_LIMIT = (
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"context length of (\d+)", re.I),
    re.compile(r"context size \(?(\d+)", re.I),
    re.compile(r'"n_ctx"\s*:\s*(\d+)'),
    re.compile(r"\bn_ctx\W{0,3}(\d+)"),
)
_OVERFLOW = re.compile(r"context (length|size|window)|n_ctx|too many tokens|too long", re.I)


@dataclass
class BackendFacts:
    """What was learned; None where the backend did not say."""

    context_length: int | None = None
    slots: int | None = None
    source: str = ""  # where the context length came from ("llama.cpp /props", ...)
    answered: bool = True  # False: the backend did not answer (ask again next time)
    # whether the backend parses the model's tool calls (None: it did not say), and who said
    tool_calls: bool | None = None
    tool_calls_source: str = ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def from_props(data: Any) -> BackendFacts | None:
    """llama.cpp's ``GET /props``."""
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    n_ctx = n_ctx or _int(data.get("n_ctx"))
    slots = _int(data.get("total_slots"))
    caps = data.get("chat_template_caps")
    tools = None
    if isinstance(caps, dict):
        said = caps.get("supports_tool_calls", caps.get("supports_tools"))
        tools = said if isinstance(said, bool) else None
    if n_ctx is None and slots is None and tools is None:
        return None
    facts = BackendFacts(n_ctx, slots, "llama.cpp /props")
    if tools is not None:
        facts.tool_calls, facts.tool_calls_source = tools, "llama.cpp /props chat_template_caps"
    return facts


LLAMA_CPP_PYTHON_OWNER = "me"  # what llama-cpp-python's server lists as every model's owner


def from_models(data: Any, model: str) -> BackendFacts | None:
    """vLLM's ``GET /v1/models``: ``max_model_len`` of the model (or of the only one);
    llama-cpp-python's: one slot, and no tool calls parsed."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    chosen = [e for e in entries if e.get("id") == model] or entries[:1]
    for entry in chosen:
        length = _int(entry.get("max_model_len"))
        if length:
            return BackendFacts(length, None, "/v1/models max_model_len")
    if entries and all(e.get("owned_by") == LLAMA_CPP_PYTHON_OWNER and e.get("permissions") == []
                       for e in entries):
        # llama-cpp-python: one Llama, one request at a time; its default chat handler
        # leaves a tool call as text
        return BackendFacts(None, 1, "", tool_calls=False, tool_calls_source="llama-cpp-python")
    return None


def from_show(data: Any) -> BackendFacts | None:
    """Ollama's ``POST /api/show``."""
    if not isinstance(data, dict):
        return None
    facts = BackendFacts()
    capabilities = data.get("capabilities")
    if isinstance(capabilities, list):
        facts.tool_calls = "tools" in capabilities
        facts.tool_calls_source = "Ollama /api/show capabilities"
    params = data.get("parameters")
    info = data.get("model_info")
    found = re.search(r"^\s*num_ctx\s+(\d+)", params, re.M) if isinstance(params, str) else None
    if found:
        facts.context_length, facts.source = int(found.group(1)), "Ollama /api/show num_ctx"
    elif isinstance(info, dict):
        for key, value in info.items():
            if str(key).endswith(".context_length") and _int(value):
                facts.context_length, facts.source = int(value), f"Ollama /api/show {key}"
                break
    return facts if facts.context_length or facts.tool_calls is not None else None


def context_from_error(message: str) -> int | None:
    """The context length a backend's refusal names (None when it names none, or the
    message is not about the context)."""
    if not message or not _OVERFLOW.search(message):
        return None
    for pattern in _LIMIT:
        found = pattern.search(message)
        if found:
            return int(found.group(1))
    return None


def is_overflow(message: str) -> bool:
    """Whether a backend's refusal says the request is longer than its context."""
    return bool(message) and bool(_OVERFLOW.search(message)) and (
        context_from_error(message) is not None
        or "exceed" in message.lower()
        or "too long" in message.lower()
    )


def _add_tool_calls(facts: BackendFacts, found: BackendFacts | None) -> None:
    if found is not None and found.tool_calls is not None and facts.tool_calls is None:
        facts.tool_calls, facts.tool_calls_source = found.tool_calls, found.tool_calls_source


async def probe(client: Any, model: str) -> BackendFacts:
    """Ask the backend behind `client` (a `ChatClient`) what it says of `model`: llama.cpp's
    ``/props`` first; when it names no context, ``/v1/models``; when that names none
    either, Ollama's ``/api/show`` (a backend is asked no more than its context needs)."""
    root = client.base_url.removesuffix("/v1")
    facts = BackendFacts()
    props = from_props(await client.probe_json("GET", f"{root}/props"))
    if props is not None:
        facts = props
    if facts.context_length is None:
        models = await client.probe_json("GET", "/models")
        if models is None and props is None:
            return BackendFacts(answered=False)  # down, or not an OpenAI server: not kept
        found = from_models(models, model)
        if found is not None and found.slots and facts.slots is None:
            facts.slots = found.slots
        _add_tool_calls(facts, found)
        if found is None or found.context_length is None:
            found = from_show(
                await client.probe_json("POST", f"{root}/api/show", {"model": model})
            )
            _add_tool_calls(facts, found)
        if found is not None and found.context_length is not None:
            facts.context_length, facts.source = found.context_length, found.source
    return facts
