"""`golem run`'s start-up banner names the metrics endpoint, or says it is off (GOLEM_METRICS_PORT=0)."""

from infra.stack import metrics_line


def test_metrics_line_names_the_port_or_says_off():
    assert metrics_line(9464) == "metrics: http://127.0.0.1:9464/metrics"
    assert metrics_line(0) == "metrics off (GOLEM_METRICS_PORT=0)"
