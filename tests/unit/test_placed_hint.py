"""A golem command run on a fleet's data dir without --golem names the golems placed there (docs/how-to/fleet.md)."""

from __future__ import annotations

from argparse import Namespace

from cli.common import _placed_hint
from golem.fleet import FleetRegistry


def test_the_placed_golems_are_named_and_a_plain_data_dir_is_left_alone(tmp_path):
    fleet = FleetRegistry(tmp_path / "fleet")
    fleet.place("demo1", "vm")
    fleet.place("demo2", "vm")
    fleet.mark("demo2", "stopped")
    hint = _placed_hint(Namespace(data=str(tmp_path / "fleet")))
    assert "demo1" in hint and "demo2" not in hint and "golem status --golem demo1" in hint
    plain = tmp_path / "plain"
    plain.mkdir()
    assert _placed_hint(Namespace(data=str(plain))) == ""
    assert not (plain / "fleet.sqlite").exists()  # asking creates no registry
