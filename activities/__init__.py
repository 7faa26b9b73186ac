"""Temporal activities: the I/O around one domain call each, grouped in classes that receive the worker's
services (golem.services.Services) and expose their activities with `activities()`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ActivitySet:
    """A group of activities sharing the worker's services: `activities()` lists every method defined with
    `@activity.defn`, bound to this instance, so the worker registers a class by naming it once."""

    def activities(self) -> list[Callable[..., Any]]:
        out = []
        for name in dir(type(self)):
            member = getattr(type(self), name, None)
            if callable(member) and hasattr(member, "__temporal_activity_definition"):
                out.append(getattr(self, name))
        return out
