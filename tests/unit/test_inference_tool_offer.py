"""The LLM is only offered write tools whose every asset is approved."""

from golem.inference.decision import decision_tools


def names(approved):
    return {t["name"] for t in decision_tools(approved)}


def test_liquidity_tools_need_both_pool_assets_approved():
    assert {"add_liquidity", "remove_liquidity", "swap", "supply"} <= names(["WETH", "USDC"])
    only_usdc = names(["USDC"])
    assert "add_liquidity" not in only_usdc and "remove_liquidity" not in only_usdc
    assert "swap" not in only_usdc and "supply" not in only_usdc  # nothing to swap between; WETH is collateral
    assert {"borrow", "repay", "decide"} <= only_usdc
