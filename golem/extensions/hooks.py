"""Firing a hook: the registry's members of the hook, in its order, each with the handler
this code path gives it. A member the registry lists without a handler here serves the hook elsewhere (its
`where` in the registry says where); a handler for a name the registry does not list (switched off, not in this
build) never runs. `stop` ends the chain early — tool_call's "any Block beats all Allows": the first refusal wins
and the members after it do not run. `fire_async` is the same for handlers that await (on_end's lifespan runs
Thanatopsis' ticks and activity). Both are plain Python over the registry's computed order, so workflow code may
fire hooks: the firing itself is deterministic and issues no Temporal command; only what a handler awaits does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from golem.extensions.registry import ExtensionRegistry

T = TypeVar("T")


def fire(registry: ExtensionRegistry, hook: str, handlers: dict[str, Callable[[], T]],
         stop: Callable[[T], bool] = lambda _: False) -> tuple[list[str], list[tuple[str, T]]]:
    """Run `hook`'s members in the registry's order. Returns (the members that ran, in order; their results)."""
    fired: list[str] = []
    results: list[tuple[str, T]] = []
    for name in registry.order(hook):
        handler = handlers.get(name)
        if handler is None:
            continue
        fired.append(name)
        out = handler()
        results.append((name, out))
        if stop(out):
            break
    return fired, results


async def fire_async(registry: ExtensionRegistry, hook: str, handlers: dict[str, Callable[[], Awaitable[T]]],
                     stop: Callable[[T], bool] = lambda _: False) -> tuple[list[str], list[tuple[str, T]]]:
    """`fire` for handlers that return awaitables: each is awaited before the next member runs."""
    fired: list[str] = []
    results: list[tuple[str, T]] = []
    for name in registry.order(hook):
        handler = handlers.get(name)
        if handler is None:
            continue
        fired.append(name)
        out = await handler()
        results.append((name, out))
        if stop(out):
            break
    return fired, results
