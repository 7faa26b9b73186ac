"""The local dev chain's public accounts: Anvil's defaults, what the dev world's deployer and simulator fall back to
on chain 31337 (infra.anvil, which starts Anvil, re-exports them; the domain never imports infra)."""

from __future__ import annotations

# Anvil's default accounts from the public dev mnemonic
# "test test test test test test test test test test test junk" — dev only, never real funds.
# index 0 = deployer / oracle owner / minter, 1 = market-simulator trader, 2 = the golem, 3 = spare,
# 4 = the x402 inference gateway's payee, 5 = its facilitator (submits settlements, pays their gas),
# 6 = the admin of USDC's proxy (a proxy's admin cannot call the token through it, so it is no one else).
ANVIL_KEYS: list[str] = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
]
ANVIL_ADDRESSES: list[str] = [
    "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
    "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",
    "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
]
ANVIL_CHAIN_ID = 31337

DEV_MNEMONIC = "test test test test test test test test test test test junk"


def dev_key(index: int) -> str:
    """Anvil's dev account `index` (any index: `golem run --golems N` gives each golem its own), derived from the
    public dev mnemonic like Anvil's own; the first seven are ANVIL_KEYS."""
    if index < len(ANVIL_KEYS):
        return ANVIL_KEYS[index]
    from eth_account import Account

    Account.enable_unaudited_hdwallet_features()
    return "0x" + bytes(Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}").key).hex()
