# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Prometheus rules and the Grafana dashboard of role kvpool_monitoring.

With promtool (Debian's ``prometheus`` package; CI must install it, else these tests are skipped with the
reason): ``promtool check rules`` on the rule files, ``promtool test rules`` on tests/prometheus/ (one firing and
one silent case per alert), and every PromQL expression of the dashboard parsed by promtool (as recording rules
of a temporary rules file), and the recorded /metrics of a real Mooncake master pair with OpLog (and of one
without) fed to promtool as a healthy case that fires no alert. Without promtool: the structure (annotations, a test
per alert) and every metric name the rules and the dashboard use, checked against what real exporters and the mock
cluster's stand-in export.
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

from ansible_collections.ascend.kvpool.plugins.module_utils import _prometheus

ROOT = Path(__file__).resolve().parents[3]
FILES = ROOT / 'roles' / 'kvpool_monitoring' / 'files'
RULE_FILES = [FILES / 'kvpool-recording.rules.yml', FILES / 'kvpool-alerts.rules.yml']
DASHBOARD = FILES / 'kvpool-dashboard.json'
TESTS = sorted((ROOT / 'tests' / 'prometheus').glob('*.test.yml'))
FIXTURES = ROOT / 'tests' / 'unit' / 'plugins' / 'module_utils' / 'fixtures'
# Real exporters, recorded (test equipment): mooncake_master 0.3.13.post1 (OpLog off; with OpLog, the leader and
# the standby of an HA pair), vLLM 0.32 (CPU build), vllm-router 0.1.17.
MASTER = FIXTURES / 'mooncake' / 'master_metrics_0_3_13.txt'
OPLOG_LEADER = FIXTURES / 'mooncake' / 'master_metrics_0_3_13_oplog_leader.txt'
OPLOG_STANDBY = FIXTURES / 'mooncake' / 'master_metrics_0_3_13_oplog_standby.txt'
REAL_RECORDINGS = [MASTER, OPLOG_LEADER, OPLOG_STANDBY,
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
    assert len(alerts) == 15
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


def used_names():
    """Every metric name of the rules and of the dashboard's queries."""
    names = set()
    for rule in rules():
        names |= metric_names(rule['expr'])
    for _title, expr in dashboard_exprs():
        names |= metric_names(concrete(expr))
    return names


def test_every_oplog_name_is_exported_by_the_recorded_leader_and_standby_and_with_oplog_off():
    """The OpLog alerts and panels read the master's ha_* gauges: each name is in the recordings of the real
    0.3.13.post1 leader and standby with --enable_oplog (a renamed metric fails here), and in the one with OpLog off
    (which exports them at 0: the panels have data and the alerts stay quiet on a pool without OpLog)."""
    oplog = {n for n in used_names() if n.startswith('ha_')}
    assert oplog >= {'ha_oplog_standby_lag', 'ha_oplog_applied_sequence_id', 'ha_standby_state',
                     'ha_pending_mutation_queue_size'}
    for path in (OPLOG_LEADER, OPLOG_STANDBY, MASTER):
        assert oplog - exported(path.read_text()) == set(), path.name
    # Their meaning, as each recording's HELP line says it (the alerts' and panels' texts rely on it).
    helps = dict(re.findall(r'^# HELP (ha_\w+) (.*)$', OPLOG_STANDBY.read_text(), re.M))
    assert helps['ha_pending_mutation_queue_size'] == 'Number of mutations pending etcd write retry'
    assert helps['ha_oplog_standby_lag'] == 'Number of OpLog entries Standby is behind Primary'
    assert '3=WATCHING' in helps['ha_standby_state'] and '8=FAILED' in helps['ha_standby_state']


def recorded_series(path, node, minutes):
    """promtool input series: every sample of a recorded /metrics, held constant for ``minutes``, with the labels
    of a master target of the role's file_sd files on ``node``."""
    target = {'job': 'kvpool_mooncake_master', 'cluster': 'kvpool', 'node': node, 'service': 'mooncake-master',
              'instance': node + '/mooncake-master', 'role': 'mooncake_master'}
    out = []
    for name, labels, value, _ts in _prometheus.samples(path.read_text()):
        labels = dict(labels, **target)
        selector = '%s{%s}' % (name, ','.join('%s="%s"' % (k, v) for k, v in sorted(labels.items())))
        out.append({'series': selector, 'values': '%s+0x%d' % (repr(value), minutes)})
    return out


def test_the_recorded_series_keep_the_oplog_state_of_each_master():
    leader = {s['series'].split('{')[0]: s['values'] for s in recorded_series(OPLOG_LEADER, 'node1', 30)}
    standby = {s['series'].split('{')[0]: s['values'] for s in recorded_series(OPLOG_STANDBY, 'node2', 30)}
    assert (leader['ha_standby_state'], standby['ha_standby_state']) == ('0.0+0x30', '3.0+0x30')
    assert standby['ha_oplog_applied_sequence_id'] == '22.0+0x30'


@needs_promtool
@pytest.mark.parametrize('recordings', [
    pytest.param({'node1': OPLOG_LEADER, 'node2': OPLOG_STANDBY}, id='oplog-leader-and-standby'),
    pytest.param({'node1': MASTER}, id='oplog-off'),
])
def test_the_recorded_healthy_masters_fire_no_alert(tmp_path, recordings):
    """The real 0.3.13.post1 masters as recorded (a healthy leader and standby with OpLog; a master with OpLog off),
    scraped unchanged for 30 minutes: no alert of the role is pending or firing."""
    series = []
    for node, path in sorted(recordings.items()):
        series.extend(recorded_series(path, node, 30))
    alerts = sorted(r['alert'] for r in rules() if 'alert' in r)
    test = {'rule_files': [str(p) for p in RULE_FILES], 'evaluation_interval': '1m',
            'tests': [{'name': 'recorded healthy masters', 'interval': '1m', 'input_series': series,
                       'alert_rule_test': [{'eval_time': t, 'alertname': a, 'exp_alerts': []}
                                           for t in ('5m', '25m') for a in alerts]}]}
    path = tmp_path / 'recorded.test.yml'
    path.write_text(yaml.safe_dump(test))
    res = subprocess.run([PROMTOOL, 'test', 'rules', str(path)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


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
