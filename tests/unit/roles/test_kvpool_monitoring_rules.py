# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Prometheus rules and the Grafana dashboard of role kvpool_monitoring.

With promtool (Debian's ``prometheus`` package; CI must install it, else these tests are skipped with the
reason): ``promtool check rules`` on the rule files, ``promtool test rules`` on tests/prometheus/ (one firing and
one silent case per alert), and every PromQL expression of the dashboard parsed by promtool (as recording rules
of a temporary rules file). Without promtool: the structure (annotations, a test per alert) and every metric name
the rules and the dashboard use, checked against what real exporters and the mock cluster's stand-in export.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
FILES = ROOT / 'roles' / 'kvpool_monitoring' / 'files'
RULE_FILES = [FILES / 'kvpool-recording.rules.yml', FILES / 'kvpool-alerts.rules.yml']
DASHBOARD = FILES / 'kvpool-dashboard.json'
TESTS = sorted((ROOT / 'tests' / 'prometheus').glob('*.test.yml'))
FIXTURES = ROOT / 'tests' / 'unit' / 'plugins' / 'module_utils' / 'fixtures'
# Real exporters, recorded (test equipment): mooncake_master 0.3.13.post1, vLLM 0.32 (CPU build), vllm-router 0.1.17.
REAL_RECORDINGS = [FIXTURES / 'mooncake' / 'master_metrics_0_3_13.txt',
                   FIXTURES / 'vllm' / 'metrics_0_32_cpu_after.txt',
                   FIXTURES / 'router' / 'metrics-cache_aware-0.1.17.txt']
# Names no recording can show: Prometheus's own, and vllm-router's error counter (a name in the 0.1.17 binary,
# vllm_router_rs.abi3.so; a series exists only after a first error).
NOT_EXPORTED_HERE = {'up', 'vllm_router_request_errors_total'}
PROMTOOL = shutil.which('promtool')
NO_PROMTOOL = 'promtool not found: apt-get install prometheus (Debian bookworm ships 2.42 with promtool)'
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMTOOL)
# Set by .ci/run (and scripts/ensure-promtool.sh installs it for make unit): there, a missing promtool is a failure,
# not a skip that hides the promtool tests.
REQUIRE_PROMTOOL = os.environ.get('KVPOOL_REQUIRE_PROMTOOL') == '1'
KEYWORDS = {'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool',
            'inf', 'nan'}


def rules():
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())['groups']:
            out.extend(group['rules'])
    return out


def dashboard_exprs():
    data = json.loads(DASHBOARD.read_text())
    return [(panel['title'], target['expr']) for panel in data['panels'] for target in panel.get('targets', [])]


def concrete(expr):
    """A dashboard expression with Grafana's variables replaced, as Grafana sends it with 'All' selected."""
    return expr.replace('$cluster', '.*')


def metric_names(expr):
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r'\{[^}]*\}', '', expr)
    expr = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', expr)
    expr = re.sub(r'\[[^\]]*\]', '', expr)
    expr = re.sub(r'\boffset\s+\w+', '', expr)
    names = set()
    for m in re.finditer(r'(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?', expr):
        if m.group(2) or m.group(1) in KEYWORDS:
            continue
        names.add(m.group(1))
    return names


def exported(text):
    return {re.split(r'[{ ]', line, maxsplit=1)[0] for line in text.splitlines() if line and not line.startswith('#')}


def standin_names():
    sys.path.insert(0, str(ROOT / 'tests' / 'mock' / 'vllm'))
    try:
        from vllm_standin.metrics import Metrics  # SIMULATED vLLM stand-in of the mock cluster
    finally:
        sys.path.pop(0)
    metrics = Metrics('qwen')
    metrics.count_http('/v1/chat/completions', 'POST', 200)  # http_requests_total has series after a first request
    return exported(metrics.render())


def test_every_alert_has_a_summary_a_description_and_a_runbook_naming_a_command():
    alerts = [r for r in rules() if 'alert' in r]
    assert len(alerts) == 11
    for rule in alerts:
        notes = rule.get('annotations') or {}
        assert set(notes) >= {'summary', 'description', 'runbook'}, rule['alert']
        assert 'Likely cause' in notes['runbook'] and 'ansible-playbook' in notes['runbook'], rule['alert']
        assert rule['labels']['severity'] in ('critical', 'warning'), rule['alert']


def test_every_alert_has_a_unit_test_that_fires_and_one_that_does_not():
    fires, silent = set(), set()
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())['tests']:
            for check in case.get('alert_rule_test') or []:
                (fires if check.get('exp_alerts') else silent).add(check['alertname'])
    alerts = {r['alert'] for r in rules() if 'alert' in r}
    assert alerts - fires == set()
    assert alerts - silent == set()


def test_every_metric_name_is_exported_by_a_real_exporter_the_stand_in_or_a_recording_rule():
    recorded = {r['record'] for r in rules() if 'record' in r}
    real = set()
    for path in REAL_RECORDINGS:
        real |= exported(path.read_text())
    standin = standin_names()
    used = {}
    for rule in rules():
        for name in metric_names(rule['expr']):
            used.setdefault(name, rule.get('record') or rule.get('alert'))
    for title, expr in dashboard_exprs():
        for name in metric_names(concrete(expr)):
            used.setdefault(name, title)
    unknown = {n: where for n, where in used.items() if n not in real | standin | recorded | NOT_EXPORTED_HERE}
    assert unknown == {}
    # The vLLM names the rules and panels rely on are exported by the real engine and by the stand-in alike.
    vllm = {n for n in used if n.startswith(('vllm:', 'http_'))}
    assert vllm - standin == set()
    assert vllm - real == set()


def test_the_metric_name_scanner_finds_names_and_skips_functions_labels_and_keywords():
    assert metric_names('sum by (cluster, le) (rate(vllm:x_bucket{a="b{c}"}[5m] offset 10m)) / on (cluster) y > 0') \
        == {'vllm:x_bucket', 'y'}


def test_promtool_is_installed_where_ci_requires_it():
    assert PROMTOOL is not None or not REQUIRE_PROMTOOL, NO_PROMTOOL + ' (KVPOOL_REQUIRE_PROMTOOL=1)'


@needs_promtool
def test_promtool_check_rules():
    res = subprocess.run([PROMTOOL, 'check', 'rules'] + [str(p) for p in RULE_FILES], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count('SUCCESS') == 2


@needs_promtool
def test_promtool_test_rules():
    assert TESTS
    res = subprocess.run([PROMTOOL, 'test', 'rules'] + [str(p) for p in TESTS], capture_output=True, text=True,
                         check=False, cwd=str(ROOT / 'tests' / 'prometheus'))
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_every_dashboard_expression_parses(tmp_path):
    exprs = dashboard_exprs()
    assert len(exprs) >= 13
    group = {'name': 'dashboard', 'rules': [{'record': 'kvpool_dashboard:panel_%d' % i, 'expr': concrete(expr)}
                                            for i, (_title, expr) in enumerate(exprs)]}
    path = tmp_path / 'dashboard.rules.yml'
    path.write_text(yaml.safe_dump({'groups': [group]}))
    res = subprocess.run([PROMTOOL, 'check', 'rules', str(path)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert 'SUCCESS: %d rules found' % len(exprs) in res.stdout


@needs_promtool
def test_a_broken_expression_is_caught_by_the_dashboard_check(tmp_path):
    path = tmp_path / 'broken.rules.yml'
    broken = {'groups': [{'name': 'x', 'rules': [{'record': 'x:y', 'expr': 'sum(rate(a[5m])'}]}]}
    path.write_text(yaml.safe_dump(broken))
    res = subprocess.run([PROMTOOL, 'check', 'rules', str(path)], capture_output=True, text=True, check=False)
    assert res.returncode != 0
