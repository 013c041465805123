"""The shipped dashboard and rules as files: generated from the names package, portable, well-formed for
Grafana's schema and for promtool, and printed by ``ragtrace dashboard``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragtrace.cli import fleet_views, main

HERE = Path(__file__).resolve().parent


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: `make test` installs Debian's prometheus package (apt-get install prometheus)")
    return found


def all_exprs() -> list[str]:
    board = fleet_views.dashboard()
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs + [e for _, e in fleet_views.RECORDING] + [a[1] for a in fleet_views.ALERTS]


def test_the_shipped_files_are_the_generators_output():
    """Regenerate with ``python -m ragtrace.cli.fleet_views`` after changing names or queries."""
    assert fleet_views.shipped("grafana") == fleet_views.dashboard_text()
    assert fleet_views.shipped("rules") == fleet_views.rules_text()
    rules = yaml.safe_load(fleet_views.shipped("rules"))
    assert [r.get("record") or r.get("alert") for g in rules["groups"] for r in g["rules"]] == [
        *[record for record, _ in fleet_views.RECORDING], *[alert[0] for alert in fleet_views.ALERTS]
    ]
    assert rules["groups"][0]["rules"][len(fleet_views.RECORDING)]["expr"] == fleet_views.ALERTS[0][1]  # JSON quoting read back as YAML


def test_every_panel_the_issue_lists_is_there():
    titles = [p["title"] for p in fleet_views.dashboard()["panels"]]
    assert titles == [
        "Recall proxy p10 / p50", "Recall proxy mean", "Answers with recall proxy <= 0.5", "Context precision p50 / mean",
        "File recall proxy p50 / mean", "Not measurable, by reason", "Invalid citations, by kind", "Wasted context tokens per run", "Wasted share of context tokens",
        "Retrieval top score p50", "Empty retrievals", "Time to first chunk p50 / p95", "Stage latency p95",
        "Judge scores: $eval_name", "Traffic by version",
    ]
    assert [v["name"] for v in fleet_views.dashboard()["templating"]["list"]] == ["datasource", "job", "pipeline", "version", "route", "eval_name"]


def test_queries_are_portable_across_the_scrape_the_collector_and_the_otlp_receiver():
    """Only ragtrace's own metric attributes and ``job``: these labels differ between the paths, and
    ``le`` of 0 and 1 is spelled "0"/"1" on some and "0.0"/"1.0" on others."""
    for expr in all_exprs():
        for banned in ("service_name", "telemetry_sdk", "otel_scope_", "instance", 'le="1"', 'le="0"', 'le="1.0"', 'le="0.0"', "target_info"):
            assert banned not in expr, (banned, expr)


def test_the_dashboard_round_trips_through_grafanas_own_model():
    """grafana-foundation-sdk's models are generated from Grafana's schemas; decoding drops a key
    they don't know, so a misspelled field anywhere (panel, target, field config, options) shows."""
    sdk = pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk needs Python >= 3.11 (the test extra's marker)")
    from grafana_foundation_sdk.cog import plugins
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    assert sdk.__name__ == "grafana_foundation_sdk"
    plugins.register_default_plugins()
    shipped = json.loads(fleet_views.shipped("grafana"))
    back = json.loads(json.dumps(Dashboard.from_json(shipped), cls=JSONEncoder))
    assert lost(shipped, back) == []
    misspelled = json.loads(fleet_views.shipped("grafana"))
    misspelled["panels"][3]["targets"][0]["legendFormatt"] = "x"
    misspelled["panels"][0]["fieldConfig"]["defaults"]["custom"]["lineWidht"] = 2
    again = json.loads(json.dumps(Dashboard.from_json(misspelled), cls=JSONEncoder))
    assert lost(misspelled, again) == [".panels[0].fieldConfig.defaults.custom.lineWidht", ".panels[3].targets[0].legendFormatt"]


def lost(original: object, back: object, path: str = "") -> list[str]:
    """Keys or values of ``original`` that ``back`` doesn't carry (defaults it adds are fine)."""
    if isinstance(original, dict) and isinstance(back, dict):
        return sorted(p for k, v in original.items() for p in (lost(v, back[k], f"{path}.{k}") if k in back else [f"{path}.{k}"]))
    if isinstance(original, list) and isinstance(back, list) and len(original) == len(back):
        return [p for i, (a, b) in enumerate(zip(original, back)) for p in lost(a, b, f"{path}[{i}]")]
    return [] if original == back else [path]


@pytest.mark.heavy
def test_promtool_checks_the_rules_and_runs_a_test_for_each_alert():
    checked = subprocess.run([promtool(), "check", "rules", str(fleet_views.SHIPPED / fleet_views.RULES_FILE)], capture_output=True, text=True)
    assert checked.returncode == 0 and f"SUCCESS: {len(fleet_views.RECORDING) + len(fleet_views.ALERTS)} rules found" in checked.stdout, checked
    tested = subprocess.run([promtool(), "test", "rules", str(HERE / "rules_test.yml")], capture_output=True, text=True, cwd=HERE)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    cases = yaml.safe_load((HERE / "rules_test.yml").read_text())
    alerted = {case["alertname"] for test in cases["tests"] for case in test.get("alert_rule_test", ()) if case["exp_alerts"]}
    assert alerted == {alert[0] for alert in fleet_views.ALERTS}


def test_the_cli_prints_each_file(tmp_path, capsys):
    assert main(["dashboard", "grafana"]) == 0
    assert capsys.readouterr().out == fleet_views.shipped("grafana")
    out = tmp_path / "rules.yml"
    assert main(["dashboard", "rules", "-o", str(out)]) == 0
    assert out.read_text() == fleet_views.shipped("rules")
    assert main(["dashboard", "kibana"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["dashboard", "rules", "-o", str(tmp_path / "missing" / "x.yml")]) == 2
    completed = subprocess.run([sys.executable, "-m", "ragtrace", "dashboard", "rules"], capture_output=True, text=True, cwd=HERE.parent.parent)
    assert completed.returncode == 0 and completed.stdout == fleet_views.shipped("rules")
