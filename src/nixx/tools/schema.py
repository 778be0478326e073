"""How a tool is described to a model: OpenAI's `tools` entries and their JSON schemas.
One shape for nixx serve's tools (`nixx.tools.registry`, `nixx.tools.files`) and the
built-in nxc agent's (`nixx.nxc.delivery.builtin_runtime`)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class FunctionDecl(TypedDict):
    name: str
    description: str
    parameters: dict[str, Any]  # a JSON schema (`object_schema`)


class ToolSpec(TypedDict):
    """One entry of an OpenAI `tools` array, as nixx offers it."""

    type: Literal["function"]
    function: FunctionDecl


def object_schema(
    properties: dict[str, Any], required: list[str], *, closed: bool = True
) -> dict[str, Any]:
    """A JSON-schema object of `properties`; `closed`: no other keys allowed."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if closed:
        schema["additionalProperties"] = False
    return schema


def function_spec(name: str, description: str, parameters: dict[str, Any]) -> ToolSpec:
    """The OpenAI `tools` entry of a function."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
