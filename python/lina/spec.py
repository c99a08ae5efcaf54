"""The text of a spec, ``lina.recurrence @name <field = value, ...>``, built
from a dict of fields and read back into one (docs/spec.md lists the fields).

Nothing here needs liblina or torch. The text is generated, never edited: a
spec is changed by changing its fields and rendering it again.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

# Every field, in the order they are written.
FIELDS = (
    "decay", "update", "gate", "gate_lower_bound", "beta", "low_rank_a",
    "low_rank_b", "write", "qk_l2norm", "scale", "key_dim", "value_dim",
    "heads", "value_heads", "dtype", "initial_state", "final_state", "varlen",
)

ENUMS = {
    "decay": ("none", "fixed", "scalar", "per_channel"),
    "update": ("additive", "delta", "dplr"),
    "gate": ("given", "softplus", "lower_bound"),
    "beta": ("none", "given", "sigmoid", "two_sigmoid"),
    "low_rank_a": ("input", "zero", "beta_key", "neg_decayed_key"),
    "low_rank_b": ("input", "zero", "beta_key", "neg_decayed_key"),
    "write": ("one", "beta"),
    "dtype": ("bf16", "f16", "f32"),
}
BOOLS = ("qk_l2norm", "initial_state", "final_state", "varlen")
INTS = ("key_dim", "value_dim", "heads", "value_heads")
FLOATS = ("scale", "gate_lower_bound")
REQUIRED = ("decay", "update", "key_dim", "value_dim", "heads", "value_heads",
            "dtype")

# The values a field has when it is left out (docs/spec.md).
DEFAULTS = {
    "gate": "given", "beta": "none", "low_rank_a": "input",
    "low_rank_b": "input", "write": "one", "qk_l2norm": False,
    "initial_state": False, "final_state": False, "varlen": False,
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")


def float_literal(x: float) -> str:
    """An MLIR float literal that reads back as the same f64 (it needs a '.')."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"a spec float must be finite, got {x}")
    text = repr(x)
    if "." not in text:
        mantissa, _, exponent = text.partition("e")
        text = mantissa + ".0" + ("e" + exponent if exponent else "")
    return text


def _value_text(field: str, value: Any) -> str:
    if field in ENUMS:
        if value not in ENUMS[field]:
            raise ValueError(f"spec field '{field}' must be one of "
                             f"{', '.join(ENUMS[field])}; got {value!r}")
        return value
    if field in BOOLS:
        if not isinstance(value, bool):
            raise ValueError(f"spec field '{field}' must be a bool, got {value!r}")
        return "true" if value else "false"
    if field in INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"spec field '{field}' must be an int, got {value!r}")
        return str(value)
    if field in FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"spec field '{field}' must be a number, got {value!r}")
        return float_literal(value)
    raise ValueError(f"unknown spec field '{field}' (known: {', '.join(FIELDS)})")


def spec_text(name: str, fields: Mapping[str, Any]) -> str:
    """``lina.recurrence @name <...>`` from ``fields``; fields set to None are
    left out. Raises ValueError naming a bad or unknown field; whether the
    combination is valid is for lina to say (the verifier)."""
    if not _NAME.match(name):
        raise ValueError(f"spec name must be an identifier, got {name!r}")
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        raise ValueError(f"unknown spec field '{unknown[0]}' "
                         f"(known: {', '.join(FIELDS)})")
    missing = [f for f in REQUIRED if fields.get(f) is None]
    if missing:
        raise ValueError(f"spec field '{missing[0]}' is required")
    parts = [f"{f} = {_value_text(f, fields[f])}" for f in FIELDS
             if fields.get(f) is not None]
    return f"lina.recurrence @{name} <{', '.join(parts)}>\n"


_RECURRENCE = re.compile(r"lina\.recurrence\s+@([A-Za-z0-9_$.]+)\s*<([^<>]*)>",
                         re.S)


def _parse_value(field: str, text: str) -> Any:
    text = text.split(":")[0].strip()       # "5.000000e-01 : f64"
    if field in BOOLS:
        if text not in ("true", "false"):
            raise ValueError(f"spec field '{field}': expected true or false, "
                             f"got {text!r}")
        return text == "true"
    if field in INTS:
        return int(text)
    if field in FLOATS:
        return float(text)
    return text


def parse_spec_text(text: str) -> tuple[str, dict[str, Any]]:
    """(name, fields) of the one ``lina.recurrence`` in ``text`` (as printed
    by lina, e.g. lina_preset_spec). Only the syntax is checked here."""
    found = _RECURRENCE.findall(text)
    if len(found) != 1:
        raise ValueError("expected exactly one 'lina.recurrence @name <...>' in "
                         f"the spec text, found {len(found)}")
    name, body = found[0]
    fields: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in body.split(","))):
        field, eq, value = item.partition("=")
        field = field.strip()
        if not eq:
            raise ValueError(f"spec item {item!r} is not 'field = value'")
        if field not in FIELDS:
            raise ValueError(f"unknown spec field '{field}'")
        fields[field] = _parse_value(field, value)
    return name, fields


def field_value(fields: Mapping[str, Any], field: str) -> Any:
    """A field's value, its default when left out (None if it has none)."""
    value = fields.get(field)
    return DEFAULTS.get(field) if value is None else value
