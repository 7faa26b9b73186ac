# pragma version 0.4.3
"""
@title Oracle
@notice Price feed: USDC per 1 WETH scaled by 1e18. Only the owner (the deployer,
        driven by the market simulator) can move it.
"""

event PriceUpdated:
    price: uint256
    updated_at: uint256

owner: public(address)
price: public(uint256)
updated_at: public(uint256)


@deploy
def __init__(initial_price: uint256):
    assert initial_price > 0, "zero price"
    self.owner = msg.sender
    self.price = initial_price
    self.updated_at = block.timestamp
    log PriceUpdated(price=initial_price, updated_at=block.timestamp)


@external
def set_price(new_price: uint256):
    assert msg.sender == self.owner, "only owner"
    assert new_price > 0, "zero price"
    self.price = new_price
    self.updated_at = block.timestamp
    log PriceUpdated(price=new_price, updated_at=block.timestamp)
