"""The write tools' pure parts against the real protocols' shapes: Router02 paths, Aave's revert codes,
the full-repay interest margin, the events each tool must and may emit, and the log check that turns a
foreign event into an invariant violation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.chain.outcome import DecodedLog, check_logs, expected_log_labels, tolerated_log_labels
from golem.chain.simulate import decode_revert
from golem.chain.tools.aave import RAY, REPAY_INTEREST_MARGIN_S, SECONDS_PER_YEAR
from golem.chain.tools.calls import aave_reason
from golem.chain.tools.schemas import TOOL_SCHEMAS, ToolArgumentError
from golem.chain.tools.uniswap_swap import pair_key, path_pairs, swap_path
from golem.models.tick import ProposedAction


def action(tool, **args) -> ProposedAction:
    return ProposedAction(action_index=0, tool=tool, arguments=args)


def logs(*labels: str) -> list[DecodedLog]:
    out = []
    for i, lbl in enumerate(labels):
        contract, event = lbl.split(".")
        out.append(DecodedLog(tx_hash="0x01", log_index=i, address="0x" + "11" * 20, contract=contract, event=event))
    return out


def test_paths_route_stables_through_weth():
    assert swap_path("WETH", "USDC") == ["WETH", "USDC"] and swap_path("DAI", "WETH") == ["DAI", "WETH"]
    assert swap_path("USDC", "DAI") == ["USDC", "WETH", "DAI"]
    assert path_pairs(["USDC", "WETH", "DAI"]) == ["PAIR_WETH_USDC", "PAIR_WETH_DAI"]
    assert pair_key("USDC", "WETH") == "PAIR_WETH_USDC"
    with pytest.raises(ToolArgumentError, match="no Uniswap V2 pair USDC/DAI"):
        pair_key("USDC", "DAI")


def test_aave_revert_codes_are_named():
    assert aave_reason("35") == "HEALTH_FACTOR_LOWER_THAN_LIQUIDATION_THRESHOLD (Aave error 35)"
    assert aave_reason("UniswapV2Router: EXPIRED") == "UniswapV2Router: EXPIRED"
    error_36 = "0x08c379a0" + (32).to_bytes(32, "big").hex() + (2).to_bytes(32, "big").hex() + b"36".ljust(32, b"\0").hex()
    assert decode_revert(error_36) == "COLLATERAL_CANNOT_COVER_NEW_BORROW (Aave error 36)"


@given(st.integers(min_value=1, max_value=10**15), st.integers(min_value=0, max_value=5 * RAY))
def test_repay_margin_covers_the_interest_of_the_margin_window(debt, rate):
    from golem.chain.tools.aave import repay_interest_margin

    margin = repay_interest_margin(debt, rate)
    # Aave compounds per second; over an hour at <= 500 %/yr the compound interest is < 1.001 × linear,
    # and the margin is twice the linear interest, plus one unit
    linear = debt * rate * REPAY_INTEREST_MARGIN_S / (SECONDS_PER_YEAR * RAY)
    assert margin >= 1 and margin >= 1.001 * linear
    assert margin <= 2 * linear + 1


def test_descriptions_name_the_protocols():
    assert "Router02" in TOOL_SCHEMAS["swap"]["description"]
    for tool in ("supply", "withdraw", "borrow", "repay"):
        assert "Aave V3" in TOOL_SCHEMAS[tool]["description"]
    for tool in ("add_liquidity", "remove_liquidity"):
        assert "Uniswap V2" in TOOL_SCHEMAS[tool]["description"]
    # argument names the deliberators use are unchanged
    assert set(TOOL_SCHEMAS["swap"]["input_schema"]["properties"]) == {
        "token_in", "token_out", "amount_in", "max_slippage_bps", "min_amount_out"}
    assert set(TOOL_SCHEMAS["repay"]["input_schema"]["properties"]) == {"amount"}


def test_required_events_per_tool():
    swap = action("swap", token_in="WETH", token_out="USDC", amount_in=1)
    assert expected_log_labels(swap, ["approve_WETH", "swap", "revoke_WETH"]) == [
        "WETH.Approval", "WETH.Approval", "WETH.Transfer", "USDC.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Swap"]
    two_hop = action("swap", token_in="USDC", token_out="DAI", amount_in=1)
    assert expected_log_labels(two_hop, ["swap"]) == [
        "USDC.Transfer", "WETH.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Swap",
        "DAI.Transfer", "PAIR_WETH_DAI.Sync", "PAIR_WETH_DAI.Swap"]
    assert expected_log_labels(action("repay", amount=1), ["approve_USDC", "repay"]) == [
        "USDC.Approval", "AAVE_POOL.Repay", "USDC.Transfer", "VDEBT_USDC.Transfer"]
    assert expected_log_labels(action("supply", amount=1), ["supply"]) == [
        "AAVE_POOL.Supply", "WETH.Transfer", "A_WETH.Transfer"]
    assert "AAVE_POOL.ReserveDataUpdated" in tolerated_log_labels(action("borrow", amount=1))
    assert tolerated_log_labels(swap) == set()


def test_a_foreign_or_extra_event_is_unexpected_and_a_missing_one_is_named():
    swap = action("swap", token_in="WETH", token_out="USDC", amount_in=1)
    calls = ["approve_WETH", "swap"]
    good = logs("WETH.Approval", "WETH.Transfer", "USDC.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Swap")
    assert check_logs(swap, calls, good) == ([], [])
    # a second WETH transfer in the swap's tx: the required one is matched once, the other is foreign
    missing, unexpected = check_logs(swap, calls, good + logs("WETH.Transfer"))
    assert missing == [] and [lg.label for lg in unexpected] == ["WETH.Transfer"]
    # an event of another protocol, and one of a contract outside the address book
    stranger = DecodedLog(tx_hash="0x01", log_index=9, address="0x" + "22" * 20, contract=None, event=None)
    missing, unexpected = check_logs(swap, calls, good + logs("AAVE_POOL.Borrow") + [stranger])
    assert [lg.label for lg in unexpected] == ["AAVE_POOL.Borrow", "0x" + "22" * 20 + ".unknown"]
    # no Sync from the pair: missing
    assert check_logs(swap, calls, [lg for lg in good if lg.event != "Sync"])[0] == ["PAIR_WETH_USDC.Sync"]
    # Aave's incidental events are tolerated, for the tool they belong to only
    repay = action("repay", amount=1)
    aave = logs("USDC.Approval", "VDEBT_USDC.Transfer", "VDEBT_USDC.Burn", "AAVE_POOL.ReserveDataUpdated",
                "USDC.Transfer", "AAVE_POOL.Repay")
    assert check_logs(repay, ["approve_USDC", "repay"], aave) == ([], [])
    assert [lg.label for lg in check_logs(swap, calls, good + logs("AAVE_POOL.ReserveDataUpdated"))[1]] == [
        "AAVE_POOL.ReserveDataUpdated"]
