"""The embedded dev world: Vyper contracts (contracts/), their compiled artifacts (artifacts/),
the deployer (deploy.deploy_world) and the market simulator (simulator.MarketSimulator)."""
