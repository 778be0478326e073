"""How a tool is described to a model: OpenAI's `tools` entries and their JSON schemas.
One shape for nixx serve's tools (`nixx.tools.registry`, `nixx.tools.files`) and the
built-in nxc agent's (`nixx.nxc.delivery.builtin_runtime`)."""

from __future__ import annotations

from typing import Any


def object_schema(
    properties: dict[str, Any], required: list[str], *, closed: bool = True
) -> dict[str, Any]:
    """A JSON-schema object of `properties`; `closed`: no other keys allowed."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if closed:
        schema["additionalProperties"] = False
    return schema


def function_spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI `tools` entry of a function."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
