"""infra/compose/ cannot run here (no docker): it is validated statically. The compose file parses and every file,
build context and volume it names exists; host ports do not collide; Prometheus scrapes what the compose file runs
(and `promtool check config` passes); the collector's pipelines name what it defines; the Grafana dashboard loads
and every panel's PromQL names a metric the worker really exports (read from workers/metrics.py at test time)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_DIR = REPO / "infra" / "compose"
COMPOSE = COMPOSE_DIR / "compose.yaml"
METRICS_SOURCE = REPO / "workers" / "metrics.py"


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), "compose.yaml has no services"
    return data


def _binds(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each volume entry (short syntax: source:target[:mode])."""
    out = []
    for entry in service.get("volumes", []):
        source, target = entry.split(":")[:2]
        out.append((source, target))
    return out


def _host_ports(service: dict[str, Any]) -> list[int]:
    ports = []
    for entry in service.get("ports", []):
        parts = str(entry).split(":")
        assert len(parts) == 2, f"port mapping {entry!r}: write HOST:CONTAINER"
        ports.append(int(parts[0]))
    return ports


def test_compose_parses_and_every_file_context_and_volume_it_names_exists():
    data = _compose()
    named = set(data.get("volumes") or {})
    services = data["services"]
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, f"{name}: neither image nor build"
        for source, target in _binds(svc):
            if source.startswith((".", "/")):
                assert (COMPOSE_DIR / source).resolve().exists(), f"{name}: bind source {source} does not exist"
            else:
                assert source in named, f"{name}: volume {source} is not declared under volumes:"
            assert target.startswith("/"), f"{name}: mount target {target} is not absolute"
        for dep in svc.get("depends_on", []):
            assert dep in services, f"{name} depends on {dep}, which is not a service"
        if "build" in svc:
            context = (COMPOSE_DIR / svc["build"]["context"]).resolve()
            dockerfile = context / svc["build"]["dockerfile"]
            assert dockerfile.is_file(), f"{name}: no Dockerfile at {dockerfile}"
            for line in dockerfile.read_text().splitlines():  # every COPY source is in the build context
                if line.startswith("COPY ") and "--from" not in line:
                    for src in line.split()[1:-1]:
                        assert (context / src).exists(), f"{dockerfile.name}: COPY {src}: not in {context}"
    unused = named - {s for svc in services.values() for s, _ in _binds(svc)}
    assert not unused, f"volumes declared but mounted by no service: {unused}"


def test_host_ports_do_not_collide():
    seen: dict[int, str] = {}
    for name, svc in _compose()["services"].items():
        for port in _host_ports(svc):
            assert port not in seen, f"host port {port}: {seen.get(port)} and {name}"
            seen[port] = name
    assert seen, "the stack publishes no port"


def test_the_worker_serves_metrics_where_prometheus_scrapes_and_connects_where_temporal_listens():
    from golem.models.config import load_config
    from workers.client import frontend

    services = _compose()["services"]
    worker = services["worker"]
    env = worker["environment"]
    port = int(env["GOLEM_METRICS_PORT"])
    assert env["GOLEM_METRICS_HOST"] == "0.0.0.0", "a worker bound to 127.0.0.1 cannot be scraped from another container"
    prom = yaml.safe_load((COMPOSE_DIR / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prom["scrape_configs"]}
    workers_job = jobs["golem-workers"]
    sd = workers_job["dns_sd_configs"][0]
    assert sd["names"] == ["worker"] and sd["port"] == port
    for job in jobs.values():  # every static target is a compose service (or Prometheus itself)
        for group in job.get("static_configs", []):
            for target in group["targets"]:
                host, tport = target.rsplit(":", 1)
                assert host == "localhost" or host in services, f"{job['job_name']}: {host} is not a service"
    # the worker's golem home: its [temporal] names the compose frontend, its [golem] home is mounted
    mounts = {target: source for source, target in _binds(worker)}
    home = COMPOSE_DIR / mounts["/golem/home"]
    cfg = load_config(home / "golem.toml")
    target = frontend(cfg.temporal, env={})
    host, tport = target.address.rsplit(":", 1)
    assert host == "temporal" and f"{tport}:{tport}" in services["temporal"]["ports"][0]
    assert target.tls is False and target.remote
    assert cfg.golem.home in mounts, f"[golem] home {cfg.golem.home} is not mounted in the worker"
    assert (COMPOSE_DIR / mounts[cfg.golem.home] / "STRATEGY.md").is_file()
    book = Path(cfg.chain.address_book)
    assert str(book.parent) in mounts and (COMPOSE_DIR / mounts[str(book.parent)] / book.name).is_file()
    assert f"EXPOSE {port}" in (COMPOSE_DIR / "Dockerfile.worker").read_text()


def test_the_worker_binds_its_metrics_where_the_compose_file_says(monkeypatch):
    """GOLEM_METRICS_HOST reaches the worker's /metrics server (bound to 127.0.0.1, another container cannot scrape)."""
    from workers.metrics import GolemMetrics, MetricsServer

    host = _compose()["services"]["worker"]["environment"]["GOLEM_METRICS_HOST"]
    monkeypatch.setenv("GOLEM_METRICS_HOST", host)
    metrics = GolemMetrics("bind-check")
    server = MetricsServer(metrics, 0)
    try:
        assert server.httpd.server_address[0] == host
    finally:
        server.httpd.server_close()
        metrics.shutdown()
    monkeypatch.delenv("GOLEM_METRICS_HOST")
    server = MetricsServer(metrics, 0)
    assert server.httpd.server_address[0] == "127.0.0.1", "outside a container the endpoint stays local"
    server.httpd.server_close()


def test_temporal_setup_registers_every_search_attribute_a_tick_sets():
    from infra.temporal import SEARCH_ATTRIBUTES

    script = (COMPOSE_DIR / "temporal" / "setup.sh").read_text()
    for name, kind in SEARCH_ATTRIBUTES.items():
        assert f"{name}:{kind}" in script, f"setup.sh does not register {name} ({kind})"
    assert yaml.safe_load((COMPOSE_DIR / "temporal" / "dynamicconfig" / "golem.yaml").read_text())
    dyn = _compose()["services"]["temporal"]["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    assert (COMPOSE_DIR / "temporal" / "dynamicconfig" / Path(dyn).name).is_file()


def test_otel_collector_pipelines_use_only_what_it_defines_and_its_ports_are_published():
    cfg = yaml.safe_load((COMPOSE_DIR / "otel-collector.yaml").read_text())
    pipelines = cfg["service"]["pipelines"]
    assert {"traces", "metrics"} <= set(pipelines)
    for name, pipe in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for ref in pipe.get(kind, []):
                assert ref in (cfg.get(kind) or {}), f"pipeline {name}: {kind[:-1]} {ref} is not defined"
        assert pipe["receivers"] and pipe["exporters"], f"pipeline {name} receives or exports nothing"
    used = {ref for pipe in pipelines.values() for kind in ("receivers", "exporters") for ref in pipe.get(kind, [])}
    assert used >= set(cfg["receivers"]) | set(cfg["exporters"]), "a receiver or exporter no pipeline uses"
    for ext in cfg["service"].get("extensions", []):
        assert ext in cfg["extensions"]
    services = _compose()["services"]
    published = _host_ports(services["otel-collector"])
    http = int(cfg["receivers"]["otlp"]["protocols"]["http"]["endpoint"].rsplit(":", 1)[1])
    assert http in published
    assert services["worker"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://otel-collector:{http}"
    prom_port = cfg["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    prom = yaml.safe_load((COMPOSE_DIR / "prometheus.yml").read_text())
    targets = [t for job in prom["scrape_configs"] for g in job.get("static_configs", []) for t in g["targets"]]
    assert f"otel-collector:{prom_port}" in targets, "Prometheus does not scrape the collector's exporter"


def exported_metric_names(source: str) -> set[str]:
    """The Prometheus names of the instruments workers/metrics.py creates, as the OTel Prometheus exporter names
    them: the unit's suffix (s → _seconds, By → _bytes), counters + _total, histograms + _bucket/_sum/_count."""
    names: set[str] = set()
    calls = re.finditer(r'create_(counter|up_down_counter|histogram|gauge|observable_gauge|observable_counter)\(\s*'
                        r'"(golem_\w+)"(.*?)\)\n', source, re.S)
    for kind, name, rest in (m.groups() for m in calls):
        unit = re.search(r'unit="([^"]+)"', rest)
        base = name + {"s": "_seconds", "By": "_bytes"}.get(unit.group(1) if unit else "", "")
        if kind in ("counter", "observable_counter"):
            names.add(base + "_total")
        elif kind == "histogram":
            names |= {base + "_bucket", base + "_sum", base + "_count"}
        else:
            names.add(base)
    return names


def test_the_metric_names_read_from_the_source_are_the_ones_the_worker_serves():
    """The naming rule above, checked on the worker's real exporter: each instrument fed once, then rendered."""
    from opentelemetry.metrics import Counter, Histogram, _Gauge

    from workers.metrics import GolemMetrics

    metrics = GolemMetrics("static-check")
    for value in vars(metrics.inst).values():
        if isinstance(value, Counter | Histogram):
            value.add(1, metrics.attrs) if isinstance(value, Counter) else value.record(1, metrics.attrs)
        elif isinstance(value, _Gauge):
            value.set(1, metrics.attrs)
    served = set(re.findall(r"^(golem_\w+?)(?:\{| )", metrics.exposition().decode(), re.M))
    metrics.shutdown()
    expected = exported_metric_names(METRICS_SOURCE.read_text())
    assert len(expected) >= 15 and expected <= served, expected - served


def test_grafana_dashboard_loads_and_every_panel_queries_an_exported_metric():
    exported = exported_metric_names(METRICS_SOURCE.read_text())
    dash = json.loads((COMPOSE_DIR / "grafana" / "dashboards" / "golem.json").read_text())
    datasources = yaml.safe_load((COMPOSE_DIR / "grafana" / "provisioning" / "datasources" / "prometheus.yml")
                                 .read_text())["datasources"]
    uids = {d["uid"] for d in datasources}
    assert dash["panels"], "the dashboard has no panel"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] in uids, f"{panel['title']}: unknown datasource"
        assert panel["targets"], f"{panel['title']}: no query"
        for target in panel["targets"]:
            names = set(re.findall(r"\bgolem_\w+", target["expr"]))
            assert names, f"{panel['title']}: {target['expr']!r} names no golem metric"
            assert names <= exported, f"{panel['title']}: {names - exported} not exported by workers/metrics.py"
    provider = yaml.safe_load((COMPOSE_DIR / "grafana" / "provisioning" / "dashboards" / "golem.yml").read_text())
    grafana = {t: s for s, t in _binds(_compose()["services"]["grafana"])}
    path = provider["providers"][0]["options"]["path"]
    assert (COMPOSE_DIR / grafana[path] / "golem.json").is_file(), "the provider's path is not the mounted folder"


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool is not installed (Debian: apt-get install prometheus ships it)")
def test_promtool_accepts_the_prometheus_config():
    proc = subprocess.run(["promtool", "check", "config", str(COMPOSE_DIR / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
