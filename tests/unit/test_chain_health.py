"""Chain RPC health folds: the alert after N failed reads, theta backing off, a good read clearing it."""

from golem.cognition.chain_health import CHAIN_ALERT_TICKS, fold_chain_failure, fold_chain_read, is_chain_read_failure
from golem.models.state import GolemState


def test_alert_after_n_failed_reads_backs_off_theta_and_a_good_read_clears_it():
    s = fold_chain_read(GolemState(golem_id="g", theta_seconds=10.0), 4, "2026-01-01T00:00:00+00:00")
    for i in range(1, CHAIN_ALERT_TICKS):
        s, alert = fold_chain_failure(s, "observe: ChainReadError: refused", theta_max_seconds=60.0)
        assert alert is None and s.chain.errors_in_row == i and s.theta_seconds == 10.0
    s, alert = fold_chain_failure(s, "observe: ChainReadError: refused", theta_max_seconds=60.0)
    assert alert and "CHAIN UNREADABLE" in alert and "tick 4" in alert and "refused" in alert
    assert s.chain.alert == alert and s.theta_seconds == 20.0
    for _ in range(5):
        s, _ = fold_chain_failure(s, "observe: x", theta_max_seconds=60.0)
    assert s.theta_seconds == 60.0  # capped at theta_max
    s = fold_chain_read(s, 12, "2026-01-01T00:05:00+00:00")
    assert s.chain.errors_in_row == 0 and s.chain.alert is None and s.chain.last_good_tick == 12


def test_only_observe_is_a_chain_read():
    assert is_chain_read_failure("observe") and not is_chain_read_failure("decide") and not is_chain_read_failure(None)
