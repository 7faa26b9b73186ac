# pragma version 0.4.3
"""
@title PriceFeed
@notice A Chainlink AggregatorV2V3-style price feed for the dev world: rounds with ids,
        answers and `updatedAt`, so a consumer can tell a fresh price from a stale one.
        Only the owner (the market simulator's oracle account) posts rounds. AaveOracle reads
        `latestAnswer()`; the golem reads `latestRoundData()` to judge the round's age.
        Chainlink's own aggregators are not published as deployable bytecode on npm, so this
        is the one protocol contract the project writes itself.
"""

struct Round:
    answer: int256
    started_at: uint256
    updated_at: uint256

event AnswerUpdated:
    current: indexed(int256)
    roundId: indexed(uint256)
    updatedAt: uint256

event NewRound:
    roundId: indexed(uint256)
    startedBy: indexed(address)
    startedAt: uint256

owner: public(address)
decimals: public(uint8)
description: public(String[64])
version: public(uint256)
latestRound: public(uint256)
rounds: HashMap[uint256, Round]


@deploy
def __init__(_decimals: uint8, _description: String[64], initial_answer: int256):
    assert initial_answer > 0, "answer must be positive"
    self.owner = msg.sender
    self.decimals = _decimals
    self.description = _description
    self.version = 4
    self._post(initial_answer)


@internal
def _post(answer: int256):
    round_id: uint256 = self.latestRound + 1
    self.latestRound = round_id
    self.rounds[round_id] = Round(answer=answer, started_at=block.timestamp, updated_at=block.timestamp)
    log NewRound(roundId=round_id, startedBy=msg.sender, startedAt=block.timestamp)
    log AnswerUpdated(current=answer, roundId=round_id, updatedAt=block.timestamp)


@external
def post_round(answer: int256):
    """Post a new round: the answer in `decimals` fixed point, stamped with this block's time."""
    assert msg.sender == self.owner, "only owner"
    assert answer > 0, "answer must be positive"
    self._post(answer)


@external
def transfer_ownership(new_owner: address):
    assert msg.sender == self.owner, "only owner"
    assert new_owner != empty(address), "zero address"
    self.owner = new_owner


@external
@view
def latestAnswer() -> int256:
    return self.rounds[self.latestRound].answer


@external
@view
def latestTimestamp() -> uint256:
    return self.rounds[self.latestRound].updated_at


@external
@view
def getAnswer(round_id: uint256) -> int256:
    return self.rounds[round_id].answer


@external
@view
def getTimestamp(round_id: uint256) -> uint256:
    return self.rounds[round_id].updated_at


@external
@view
def latestRoundData() -> (uint80, int256, uint256, uint256, uint80):
    r: Round = self.rounds[self.latestRound]
    rid: uint80 = convert(self.latestRound, uint80)
    return (rid, r.answer, r.started_at, r.updated_at, rid)


@external
@view
def getRoundData(round_id: uint80) -> (uint80, int256, uint256, uint256, uint80):
    r: Round = self.rounds[convert(round_id, uint256)]
    assert r.updated_at > 0, "No data present"
    return (round_id, r.answer, r.started_at, r.updated_at, round_id)
