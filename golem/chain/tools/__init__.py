"""The write tools: schemas.py and arguments.py (what a deliberator may ask for and the check of its arguments),
valuation.py (what an action is worth), calls.py (a planned call, approvals and revokes), one builder per protocol
(uniswap_swap.py, aave.py, uniswap_pool.py) and build.py, which picks the builder for an action's tool."""
