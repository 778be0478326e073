"""What a backend says about itself: the model's context length and how many requests it
serves at once (its slots).

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
    if n_ctx is None and slots is None:
        return None
    return BackendFacts(n_ctx, slots, "llama.cpp /props")


LLAMA_CPP_PYTHON_OWNER = "me"  # what llama-cpp-python's server lists as every model's owner


def from_models(data: Any, model: str) -> BackendFacts | None:
    """vLLM's ``GET /v1/models``: ``max_model_len`` of the model (or of the only one);
    llama-cpp-python's: one slot."""
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
        return BackendFacts(None, 1, "")  # llama-cpp-python: one Llama, one request at a time
    return None


def from_show(data: Any) -> BackendFacts | None:
    """Ollama's ``POST /api/show``."""
    if not isinstance(data, dict):
        return None
    params = data.get("parameters")
    if isinstance(params, str):
        found = re.search(r"^\s*num_ctx\s+(\d+)", params, re.M)
        if found:
            return BackendFacts(int(found.group(1)), None, "Ollama /api/show num_ctx")
    info = data.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if str(key).endswith(".context_length") and _int(value):
                return BackendFacts(int(value), None, f"Ollama /api/show {key}")
    return None


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


async def probe(client: Any, model: str) -> BackendFacts:
    """Ask the backend behind `client` (a `ChatClient`) what it says of `model`."""
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
        if found is None or found.context_length is None:
            found = from_show(
                await client.probe_json("POST", f"{root}/api/show", {"model": model})
            )
        if found is not None and found.context_length is not None:
            facts.context_length, facts.source = found.context_length, found.source
    return facts
