"""A staged gating inheritance package seeds a newborn golem's learned gating."""

from __future__ import annotations

import json

from golem.cognition.learned_gating import INHERITANCE_FILE, export_package
from golem.models.config import GolemConfig
from golem.models.state import LearnedGatingState
from infra.stack import inherited_state


def test_newborn_inherits_a_staged_package(tmp_path):
    cfg = GolemConfig()
    assert inherited_state(cfg, tmp_path) is None
    parent = LearnedGatingState()
    parent = parent.model_copy(update={"hedge": parent.hedge.model_copy(update={"weights": [0.4, 0.1, 0.1, 0.1, 0.3]})})
    (tmp_path / INHERITANCE_FILE).write_text(json.dumps(export_package(parent, "parent", 500)))
    state = inherited_state(cfg, tmp_path)
    assert state.tick == 0 and state.golem_id == cfg.golem.id
    assert state.learned_gating.inherited_from and state.learned_gating.hedge.weights[0] > 0.3
