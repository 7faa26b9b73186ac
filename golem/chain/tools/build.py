"""An action turned into the contract calls that perform it, by its tool's protocol. Nothing here signs or
sends; the executor does that, and only with a permit."""

from __future__ import annotations

from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.tools.aave import aave_calls
from golem.chain.tools.arguments import parse_arguments
from golem.chain.tools.calls import PlannedCall
from golem.chain.tools.schemas import LP_TOOLS
from golem.chain.tools.uniswap_pool import pool_calls
from golem.chain.tools.uniswap_swap import swap_calls
from golem.models.observation import Observation
from golem.models.tick import ProposedAction


def build_calls(w3: Web3, deployment: Deployment, account: str, action: ProposedAction, observation: Observation) -> list[PlannedCall]:
    """Turn an action into the contract calls that perform it (approve first when needed, revoke last).

    Reads the chain (allowances, the router's quote, the debt, the pair's reserves), so the plan
    reflects the state at build time; the executor freezes the plan in the tx journal so a retry sends
    exactly what was planned.
    """
    args = parse_arguments(action.tool, action.arguments)
    account = w3.to_checksum_address(account)
    if action.tool == "swap":
        return swap_calls(w3, deployment, account, args)
    if action.tool in LP_TOOLS:
        return pool_calls(w3, deployment, account, action.tool, args)
    return aave_calls(w3, deployment, account, action.tool, args)
