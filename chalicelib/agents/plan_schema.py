"""The JSON Schema of a declared plan step, derived from the tools' input fields (``tools.TOOLS``).

One source of truth: the server checks a step's ``input`` with the tool's ``F`` fields
(``input_errors``), and ``component_schemas`` turns the same fields into the schemas the platform's
OpenAPI document states (``PlanStep``: a ``oneOf`` discriminated by ``tool``);
``tests/functional/agents/test_plan_schema.py`` asserts the document holds exactly these.

A step's input names only its tool's fields. A string field takes any string within its bounds (its
templates are filled in at run time, and the filled-in value is checked again then); any other field
takes its own type or a string that is exactly one template reference (``REFERENCE_PATTERN``), whose
value replaces it at run time.
"""
from __future__ import annotations

from typing import Any

from chalicelib.agents.tools import TOOLS, Tool
from chalicelib.core.http.validation import F, problem

STEP_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,39}$"
REFERENCE_PATTERN = (r"^\{\{ *(input(\.[A-Za-z0-9_-]+)+|steps\.[A-Za-z][A-Za-z0-9_]{0,39}\.output(\.[A-Za-z0-9_-]+)*)"
                     r" *\}\}$")
STEP_NAME = F(str, required=True, pattern=STEP_NAME_PATTERN)
_REFERENCE = F(str, pattern=REFERENCE_PATTERN)
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}
_REF = "#/components/schemas/"


def component_name(tool: str) -> str:
    """``query`` -> ``PlanStepQuery``, ``knowledge_search`` -> ``PlanStepKnowledgeSearch``."""
    return "PlanStep" + "".join(part.capitalize() for part in tool.split("_"))


def _types(f: F) -> list[str]:
    names = [_JSON_TYPES[t] for t in (f.type if isinstance(f.type, tuple) else (f.type,))]
    if "number" in names and "integer" in names:  # every JSON integer is a number
        names.remove("integer")
    return names


def field_schema(f: F) -> dict[str, Any]:
    """The JSON Schema of one tool input field (a non-string field also takes one template reference)."""
    if f.check is not None or f.enum is not None or f.nullable:
        raise ValueError("a tool input field must be stated with type, bounds and pattern only")
    types = _types(f)
    schema: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
    bounds = {"minLength": f.min_len, "maxLength": f.max_len, "pattern": f.pattern} if types == ["string"] else \
        {"minimum": f.minimum, "maximum": f.maximum}
    schema.update({k: v for k, v in bounds.items() if v is not None})
    if "string" in types:
        return schema
    return {"anyOf": [schema, {"$ref": _REF + "StepReference"}]}


def input_schema(tool: Tool) -> dict[str, Any]:
    required = [name for name, f in tool.fields.items() if f.required]
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        schema["required"] = required
    schema["properties"] = {name: field_schema(f) for name, f in tool.fields.items()}
    return schema


def step_schema(tool: Tool) -> dict[str, Any]:
    """One ``oneOf`` branch: a step calling ``tool`` (``input`` required when the tool has required fields)."""
    needs_input = any(f.required for f in tool.fields.values())
    return {"type": "object", "description": tool.description, "additionalProperties": False,
            "required": ["name", "tool", "input"] if needs_input else ["name", "tool"],
            "properties": {"name": {"$ref": _REF + "StepName"}, "tool": {"const": tool.name},
                           "input": input_schema(tool)}}


def component_schemas() -> dict[str, dict[str, Any]]:
    """Every schema the document's ``components.schemas`` must hold for plan steps, by name."""
    out: dict[str, dict[str, Any]] = {
        "StepName": {"type": "string", "pattern": STEP_NAME_PATTERN},
        "StepReference": {"type": "string", "pattern": REFERENCE_PATTERN,
                          "description": "Exactly one {{input.<field>}} or {{steps.<earlier step>.output[.path]}}"},
        "PlanStep": {"oneOf": [{"$ref": _REF + component_name(name)} for name in TOOLS],
                     "discriminator": {"propertyName": "tool",
                                       "mapping": {name: _REF + component_name(name) for name in TOOLS}}},
    }
    out.update({component_name(name): step_schema(tool) for name, tool in TOOLS.items()})
    return out


def input_errors(tool: str, args: dict[str, Any], where: str) -> list[dict[str, str]]:
    """Field errors of a declared step's ``input`` for ``tool`` (the schema ``input_schema`` states)."""
    fields = TOOLS[tool].fields
    errors = [{"field": f"{where}.{str(key)[:40]}", "message": f"is not an input of {tool}"}
              for key in args if key not in fields]
    for name, f in fields.items():
        if name not in args:
            if f.required:
                errors.append({"field": f"{where}.{name}", "message": "is required"})
            continue
        value = args[name]
        message = problem(_REFERENCE if isinstance(value, str) and "string" not in _types(f) else f, value)
        if message:
            errors.append({"field": f"{where}.{name}", "message": message})
    return errors


def call_schema(tool: Tool) -> dict[str, Any]:
    """The JSON Schema of a model's call of ``tool`` (OpenAI ``parameters``, Bedrock ``inputSchema``): the
    tool's input fields with their own types only (a model's call takes no templates)."""
    props: dict[str, Any] = {}
    for name, f in tool.fields.items():
        types = _types(f)
        schema: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        bounds = {"minLength": f.min_len, "maxLength": f.max_len} if types == ["string"] else \
            {"minimum": f.minimum, "maximum": f.maximum}
        schema.update({k: v for k, v in bounds.items() if v is not None})
        props[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    required = [name for name, f in tool.fields.items() if f.required]
    if required:
        out["required"] = required
    return out
