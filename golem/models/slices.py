"""Slices of a model on the wire.

A step's activity input carries only the fields of GolemState and of the Observation that the step reads. On
the activity side the slice is rebuilt as a subclass that refuses to read any other field: a new read shows
up as a failing test naming the list to extend, never as a silently defaulted value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class SliceError(RuntimeError):
    """A step read a field its slice does not carry (a programming error, not bad input)."""


_CLASSES: dict[type, type] = {}


def slice_class(model: type[M]) -> type[M]:
    """`model`'s slice class: the same model, whose reads of fields outside the slice raise SliceError."""
    if model in _CLASSES:
        return _CLASSES[model]
    names = frozenset(model.model_fields)

    def __getattribute__(self: BaseModel, name: str) -> Any:
        if name in names:
            private = object.__getattribute__(self, "__pydantic_private__") or {}
            fields = private.get("_slice_fields")
            if fields is not None and name not in fields:
                where = private.get("_slice_where") or "?"
                raise SliceError(f"{model.__name__}.{name} is not in the {where} slice: add it to that list")
        return BaseModel.__getattribute__(self, name)

    cls = type(f"{model.__name__}Slice", (model,), {"__getattribute__": __getattribute__,
                                                     "__module__": model.__module__})
    _CLASSES[model] = cls
    return cls


TAIL = "[-1:]"  # "<list field>[-1:]" in a slice: only the newest element, and the field itself unreadable


def tail_fields(fields: Iterable[str]) -> dict[str, bool]:
    """{field name: whether only its last element is in the slice}."""
    return {f.removesuffix(TAIL): f.endswith(TAIL) for f in fields}


def slice_dump(data: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """The slice of a model's dumped dict: only `fields`, a tail field cut to its newest element."""
    out: dict[str, Any] = {}
    for name, tail in tail_fields(fields).items():
        if name in data:
            out[name] = data[name][-1:] if tail and isinstance(data[name], list) else data[name]
    return out


def as_slice(value: M, fields: frozenset[str] | set[str], where: str) -> M:
    """`value` with only `fields` readable (`where` names the list to extend, for the error). A tail field
    ("price_history[-1:]") keeps its newest element, readable only through the model's own properties."""
    names = tail_fields(fields)
    out = slice_class(type(value)).model_validate(slice_dump(value.model_dump(include=set(names)), fields))
    readable = frozenset(n for n, tail in names.items() if not tail)
    out.__pydantic_private__ = {"_slice_fields": readable, "_slice_where": where}
    return out
