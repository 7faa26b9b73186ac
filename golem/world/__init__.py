"""The embedded dev world: our Vyper contracts (contracts/: the feeds and DAI) and their compiled artifacts
(artifacts/), the deployer of the published protocols and Circle's USDC (deploy.deploy_world) and the market
simulator (simulator.MarketSimulator)."""
