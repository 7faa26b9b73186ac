"""`golem run`'s start-up banner names the metrics endpoint, or says it is off (GOLEM_METRICS_PORT=0)."""

from infra.stack import metrics_line


def test_metrics_line_names_the_port_or_says_off():
    assert metrics_line(9464) == "metrics: http://127.0.0.1:9464/metrics"
    assert metrics_line(0) == "metrics off (GOLEM_METRICS_PORT=0)"


def test_the_tick_line_is_short_and_aligned_with_the_cost_before_the_action(tmp_path):
    """`golem run`'s console line per tick: cost in a fixed-width column before the action, no padding (it was
    padded to ~130 characters, which wrapped in an 80-column terminal)."""
    from golem.life.cycle_store import CycleStore
    from infra.stack import TickLines
    from tests.unit.test_unmeasured_fields import _reflected

    lines = TickLines(tmp_path)
    CycleStore(tmp_path).persist(_reflected())
    (line,) = lines.new_lines()
    assert line.startswith("tick      7  T1 ") and "pe 0.400  $0." in line and line.endswith("hold"), line
    assert len(line) < 80 and "  " not in line.split("$", 1)[1].split("  ", 1)[1], line
    assert lines.new_lines() == []  # printed once
