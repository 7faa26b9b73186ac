"""The extension registry and its hooks, the Python way. See registry.py."""

from golem.extensions.registry import (  # noqa: F401
    HOOKS,
    SPEC_ORDER,
    Extension,
    ExtensionRegistry,
    RegistryError,
    build_registry,
    builtin_extensions,
    registry_for,
)
