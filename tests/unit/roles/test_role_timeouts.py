# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Timeouts and intervals of roles kvpool_monitoring, kvpool_router and kvpool_benchmark (issue 32): 0, below, NaN
and infinity are refused by the role's own check, naming the variable and the fix, before anything is written or
started. The check tasks are taken from the roles' task files and run on the controller (connection local), one play
per case in one ansible-playbook process."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
pytestmark = pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to %s' % sys.executable)

MONITORING = {'kvpool_monitoring_prometheus_ready_timeout': 60, 'kvpool_monitoring_prometheus_scrape_interval': '15s',
              'kvpool_monitoring_prometheus_evaluation_interval': '1m30s'}
ROUTER = {'kvpool_router_state': 'started', 'kvpool_router_ready_timeout': 60, 'kvpool_router_poll_interval': 0.2,
          'kvpool_router_stop_timeout': 10, 'kvpool_router_health_check_interval': 2,
          'kvpool_router_circuit_breaker_timeout': 5, 'kvpool_router_worker_startup_timeout': 10}
BENCHMARK = {'kvpool_benchmark_aisbench_timeout': 3600}
CASES = [
    ('monitoring', {}, None),
    ('monitoring', {'kvpool_monitoring_prometheus_ready_timeout': 0}, 'kvpool_monitoring_prometheus_ready_timeout'),
    ('monitoring', {'kvpool_monitoring_prometheus_ready_timeout': -5}, 'kvpool_monitoring_prometheus_ready_timeout'),
    ('monitoring', {'kvpool_monitoring_prometheus_scrape_interval': '0s'},
     'kvpool_monitoring_prometheus_scrape_interval'),
    ('monitoring', {'kvpool_monitoring_prometheus_evaluation_interval': '15'},
     'kvpool_monitoring_prometheus_evaluation_interval'),
    ('router', {}, None),
    ('router', {'kvpool_router_ready_timeout': 0}, 'kvpool_router_ready_timeout'),
    ('router', {'kvpool_router_poll_interval': -0.5}, 'kvpool_router_poll_interval'),
    ('router', {'kvpool_router_stop_timeout': 'nan'}, 'kvpool_router_stop_timeout'),
    ('router', {'kvpool_router_ready_timeout': 'inf'}, 'kvpool_router_ready_timeout'),
    ('router', {'kvpool_router_health_check_interval': 0}, 'kvpool_router_health_check_interval'),
    ('router', {'kvpool_router_circuit_breaker_timeout': -1}, 'kvpool_router_circuit_breaker_timeout'),
    ('router', {'kvpool_router_worker_startup_timeout': 0}, 'kvpool_router_worker_startup_timeout'),
    # A stop reads only the stop timeout: a bad ready timeout does not keep a router from stopping.
    ('router', {'kvpool_router_state': 'stopped', 'kvpool_router_ready_timeout': 0}, None),
    ('router', {'kvpool_router_state': 'stopped', 'kvpool_router_stop_timeout': 0}, 'kvpool_router_stop_timeout'),
    ('benchmark', {}, None),
    ('benchmark', {'kvpool_benchmark_aisbench_timeout': None}, None),  # null: the module's 3600
    ('benchmark', {'kvpool_benchmark_aisbench_timeout': 0}, 'kvpool_benchmark_aisbench_timeout'),
    ('benchmark', {'kvpool_benchmark_aisbench_timeout': -5}, 'kvpool_benchmark_aisbench_timeout'),
    ('benchmark', {'kvpool_benchmark_aisbench_timeout': 'nan'}, 'kvpool_benchmark_aisbench_timeout'),
    ('benchmark', {'kvpool_benchmark_aisbench_timeout': 'inf'}, 'kvpool_benchmark_aisbench_timeout'),
    ('benchmark', {'kvpool_benchmark_aisbench_timeout': 'an hour'}, 'kvpool_benchmark_aisbench_timeout'),
]
SETTINGS = {'monitoring': MONITORING, 'router': ROUTER, 'benchmark': BENCHMARK}
FIX = {'monitoring': 'Fix: set it in your inventory', 'router': 'Fix: set it in your inventory',
       'benchmark': 'Fix: set kvpool_benchmark_aisbench_timeout in your inventory'}


def check_task(role, name, title):
    tasks = yaml.safe_load((ROOT / 'roles' / role / 'tasks' / name).read_text())
    found = [t for t in tasks if title in t.get('name', '') and 'ansible.builtin.assert' in t]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope='module')
def outcomes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('timeouts')
    tasks = {'monitoring': check_task('kvpool_monitoring', 'preflight.yml', 'timeout'),
             'router': check_task('kvpool_router', 'plan.yml', 'timeout'),
             'benchmark': check_task('kvpool_benchmark', 'plan.yml', 'AISBench deadline')}
    plays = []
    for index, (role, given, _bad) in enumerate(CASES):
        variables = dict(SETTINGS[role], **given)
        variables['ansible_python_interpreter'] = sys.executable
        plays.append({'name': 'case %d' % index, 'hosts': 'localhost', 'gather_facts': False, 'connection': 'local',
                      'vars': variables, 'tasks': [dict(tasks[role], ignore_errors=True)]})
    (tmp / 'play.yml').write_text(yaml.safe_dump(plays))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'), ANSIBLE_LOCALHOST_WARNING='false',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false', ANSIBLE_STDOUT_CALLBACK='default', ANSIBLE_NOCOLOR='1')
    res = subprocess.run([str(PLAYBOOK), '-i', 'localhost,', str(tmp / 'play.yml')], capture_output=True, text=True,
                         env=env, cwd=str(tmp), check=False)
    parts = re.split(r'^PLAY \[case ', res.stdout, flags=re.M)[1:]
    assert len(parts) == len(CASES), res.stdout[-3000:] + res.stderr[-2000:]
    return parts


@pytest.mark.parametrize('index', range(len(CASES)))
def test_a_timeout_that_is_no_bound_is_refused_naming_the_variable(outcomes, index):
    role, given, bad = CASES[index]
    out = outcomes[index]
    if bad is None:
        assert 'fatal:' not in out and 'ok: [localhost]' in out, out
        return
    assert 'fatal: [localhost]' in out, out
    assert_names(out, bad, FIX[role])
    if role != 'benchmark':
        assert_names(out, 'localhost: ')
    others = [name for name in SETTINGS[role] if name != bad and 'state' not in name]
    assert not [name for name in others if name + ' is' in out], out  # only the bad one is named
