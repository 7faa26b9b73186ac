"""The extension registry: layers, dependencies, the declared firing orders, optional switches."""

import pytest

from golem.extensions import SPEC_ORDER, Extension, RegistryError, build_registry, builtin_extensions


def test_this_build_registers_and_orders_after_turn_as_the_spec_says():
    reg = build_registry()
    assert len(builtin_extensions()) == 28
    order = reg.order("after_turn")
    spec = list(SPEC_ORDER["after_turn"])
    assert order == [n for n in spec if n in order]
    assert order[:3] == ["heartbeat", "lifespan", "daimon"] and order[-1] == "telemetry"
    assert reg.order("tool_call") == ["telemetry", "safety", "risk", "permits"]
    assert reg.order("before_agent_start") == ["tools", "context", "compiler", "model-router", "safety"]
    assert reg.order("on_end") == ["lifespan"]
    assert order[-2:] == ["clade", "telemetry"]  # the pheromone field lays before the record is persisted


def test_a_dependency_on_a_higher_layer_is_refused_naming_both():
    bad = Extension(name="sneaky", layer=1, hooks=frozenset(), depends_on=("daimon",))
    with pytest.raises(RegistryError, match=r"'sneaky' \(layer 1\) depends on 'daimon' \(layer 2\)"):
        build_registry(extra=[bad])


def test_an_unknown_dependency_and_a_cycle_are_refused():
    with pytest.raises(RegistryError, match="'x' .* depends on 'nope', which is not registered"):
        build_registry(extra=[Extension(name="x", layer=4, hooks=frozenset(), depends_on=("nope",))])
    with pytest.raises(RegistryError, match="cycle"):
        build_registry(extra=[Extension(name="a", layer=4, hooks=frozenset(), depends_on=("b",)),
                              Extension(name="b", layer=4, hooks=frozenset(), depends_on=("a",))])


def test_a_hook_the_spec_gives_no_place_is_refused():
    with pytest.raises(RegistryError, match="'daimon2' .* serves after_turn, but the declared after_turn order"):
        build_registry(extra=[Extension(name="daimon2", layer=2, hooks=frozenset({"after_turn"}))])


def test_only_optional_extensions_may_be_switched_off():
    reg = build_registry(disabled=["cybernetics"])
    assert "cybernetics" not in reg.order("after_turn") and not reg.active("cybernetics")
    with pytest.raises(RegistryError, match="'lifespan' .* is not optional"):
        build_registry(disabled=["lifespan"])
    with pytest.raises(RegistryError, match="'bogus', which is not an extension"):
        build_registry(disabled=["bogus"])


def test_a_code_path_running_hooks_out_of_order_is_named():
    reg = build_registry()
    reg.check_order("tool_call", ["safety", "risk", "permits"])
    with pytest.raises(RegistryError, match="'permits' runs before 'risk'"):
        reg.check_order("tool_call", ["safety", "permits", "risk"])


def test_registering_twice_or_firing_before_build_is_refused():
    from golem.extensions import ExtensionRegistry

    reg = ExtensionRegistry()
    ext = Extension(name="x", layer=0, hooks=frozenset())
    reg.register(ext)
    with pytest.raises(RegistryError, match="'x' is registered twice"):
        reg.register(ext)
    reg.build()
    assert reg.order("after_turn") == []
    reg.register(Extension(name="y", layer=0, hooks=frozenset()))  # a new extension: the orders are stale
    with pytest.raises(RegistryError, match="not built"):
        reg.order("after_turn")
    with pytest.raises(RegistryError, match="unknown hook"):
        Extension(name="z", layer=0, hooks=frozenset({"on_lunch"}))
    with pytest.raises(RegistryError, match="layer 9 is not in 0..7"):
        Extension(name="z", layer=9, hooks=frozenset())


def test_registry_or_full_falls_back_to_the_full_build_and_says_why():
    from golem.extensions.registry import registry_or_full

    reg, refused = registry_or_full(["dream"])
    assert refused is None and "dream" not in reg.order("after_turn")
    reg, refused = registry_or_full(["safety"])  # not optional: refused, and the caller goes on with everything
    assert isinstance(refused, RegistryError) and "'safety'" in str(refused) and "safety" in reg.order("tool_call")


def test_x402_payment_is_present_and_serves_before_provider_request():
    from golem.extensions.registry import build_registry

    reg = build_registry()
    ext = reg.get("x402-payment")
    assert ext.present and ext.optional and ext.depends_on == ("provider-adapter",)
    assert "golem.inference.payment" in ext.where["before_provider_request"]
    assert reg.order("before_provider_request") == ["x402-payment"]
    assert build_registry(["x402-payment"]).order("before_provider_request") == []
