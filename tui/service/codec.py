"""Frozen records to JSON and back, for the wire between the engine and its clients.

The engine process hands its clients the same frozen records a face in the same
process would get (`SessionSnapshot` and everything it holds), so the room is
built once, against `SessionSource`, whichever side of a socket the engine is
on. A record crosses as `{"__r": "module:Class", "f": {...}}`; tuples, sets,
non-finite floats and dicts with keys JSON cannot hold are tagged so they come
back as they left (a tuple stays hashable, a NaN stays a NaN).

Decoding builds only dataclasses defined in this package's own record
modules (`RECORD_PACKAGES`): a message can never make a client import or
construct anything else.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import math
from pathlib import PurePath

RECORD_PACKAGES = ("tui.engine.", "tui.session.", "tui.probes", "tui.campaign.",
                   "tui.service.", "tui.store.status")  # the store: its light status only
_TAGS = ("__r", "__t", "__s", "__m", "__f", "__p")
MAX_DEPTH = 64


class WireError(ValueError):
    """A message that does not decode to the records it claims to hold."""


def to_wire(obj, depth: int = 0, known: dict | None = None):
    """`known`: id -> wire form of objects encoded before (the campaign state, the same
    object until the next ledger event), reused as they are."""
    if known and id(obj) in known:
        return known[id(obj)]
    if depth > MAX_DEPTH:
        raise WireError("nesting deeper than the wire allows")
    if isinstance(obj, enum.Enum):
        return to_wire(obj.value, depth + 1, known)
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__f": repr(obj)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        return {"__r": f"{cls.__module__}:{cls.__qualname__}",
                "f": {f.name: to_wire(getattr(obj, f.name), depth + 1, known)
                      for f in dataclasses.fields(obj)}}
    if isinstance(obj, tuple):
        if obj and _is_points(obj):  # a chart's history: flat, thousands of points cheaply
            return {"__p": [v for point in obj for v in point]}
        return {"__t": [to_wire(x, depth + 1, known) for x in obj]}
    if isinstance(obj, (set, frozenset)):
        return {"__s": [to_wire(x, depth + 1, known) for x in sorted(obj, key=repr)]}
    if isinstance(obj, list):
        return [to_wire(x, depth + 1, known) for x in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and k not in _TAGS for k in obj):
            return {k: to_wire(v, depth + 1, known) for k, v in obj.items()}
        return {"__m": [[to_wire(k, depth + 1, known), to_wire(v, depth + 1, known)]
                        for k, v in obj.items()]}
    if isinstance(obj, PurePath):
        return str(obj)
    raise WireError(f"cannot send a {type(obj).__name__}")


def _is_points(obj: tuple) -> bool:
    """A tuple of (x, y) pairs of finite floats (the shape of every chart history)."""
    for point in obj:
        if not (type(point) is tuple and len(point) == 2 and type(point[0]) is float
                and type(point[1]) is float and math.isfinite(point[0])
                and math.isfinite(point[1])):
            return False
    return True


_classes: dict[str, type] = {}
_enum_fields: dict[type, dict[str, type]] = {}


def _enums_of(cls: type) -> dict[str, type]:
    """The fields of a record declared as an enum (alone or `| None`): an enum crosses
    the wire as its value and is made an enum again here."""
    found = _enum_fields.get(cls)
    if found is not None:
        return found
    import typing

    found = {}
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError, AttributeError):  # a hint this side cannot resolve:
        # the values stay plain
        hints = {}
    for name, hint in hints.items():
        options = typing.get_args(hint) or (hint,)
        for option in options:
            if isinstance(option, type) and issubclass(option, enum.Enum):
                found[name] = option
    _enum_fields[cls] = found
    return found


def _record_class(name: str) -> type:
    cls = _classes.get(name)
    if cls is not None:
        return cls
    module, _, qualname = name.partition(":")
    if not qualname or not module.startswith(RECORD_PACKAGES) or "." in qualname:
        raise WireError(f"not a record this client knows: {name[:80]!r}")
    try:
        cls = getattr(importlib.import_module(module), qualname)
    except (ImportError, AttributeError) as exc:
        raise WireError(f"not a record this client knows: {name[:80]!r}") from exc
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise WireError(f"not a record: {name[:80]!r}")
    _classes[name] = cls
    return cls


def from_wire(data, depth: int = 0):
    if depth > MAX_DEPTH:
        raise WireError("nesting deeper than the wire allows")
    if isinstance(data, list):
        return [from_wire(x, depth + 1) for x in data]
    if not isinstance(data, dict):
        return data
    if "__r" in data:
        cls = _record_class(str(data["__r"]))
        fields = data.get("f")
        if not isinstance(fields, dict):
            raise WireError("a record without its fields")
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        enums = _enums_of(cls)
        values = {}
        for key, raw in fields.items():
            if key not in known:  # a field this side does not know (a newer engine)
                continue
            value = from_wire(raw, depth + 1)
            if key in enums and value is not None:
                try:
                    value = enums[key](value)
                except ValueError:
                    raise WireError(f"{cls.__name__}.{key}: not one of its values") from None
            values[key] = value
        try:
            return cls(**values)
        except TypeError as exc:
            raise WireError(f"{cls.__name__}: {exc}") from None
    if "__t" in data:
        return tuple(from_wire(x, depth + 1) for x in _items(data["__t"]))
    if "__s" in data:
        return frozenset(from_wire(x, depth + 1) for x in _items(data["__s"]))
    if "__m" in data:
        out = {}
        for entry in _items(data["__m"]):
            key, value = _pair(entry, depth)
            out[key] = from_wire(value, depth + 1)
        return out
    if "__p" in data:
        flat = _items(data["__p"])
        if len(flat) % 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                    for v in flat):
            raise WireError("points that are not (x, y) numbers")
        return tuple(zip(map(float, flat[0::2]), map(float, flat[1::2])))
    if "__f" in data:
        try:
            return float(data["__f"])
        except (TypeError, ValueError):
            raise WireError("a float that is not one") from None
    return {k: from_wire(v, depth + 1) for k, v in data.items()}


def _items(value) -> list:
    if not isinstance(value, list):
        raise WireError("a tagged collection that is not a list")
    return value


def _pair(value, depth: int) -> tuple:
    """(the decoded key, the value still on the wire)."""
    if not (isinstance(value, list) and len(value) == 2):
        raise WireError("a mapping entry that is not a pair")
    key = from_wire(value[0], depth + 1)
    try:
        hash(key)
    except TypeError:
        raise WireError("a mapping key that cannot be a key") from None
    return key, value[1]
