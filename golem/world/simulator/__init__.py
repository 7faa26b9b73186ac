"""The market simulator: moves the dev world's prices the way a real market does, so a golem sees calm,
trending, volatile and crashing markets on the real protocols. paths.py (the feed's seeded path) below
trader.py (arbitrage and noise through Router02) below liquidator.py (Aave liquidationCall under health factor
1.0) below market.py (MarketSimulator: one step = feeds, trades, liquidations); __main__.py is the command."""
