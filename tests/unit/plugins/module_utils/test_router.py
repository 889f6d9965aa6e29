# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm-router helpers: its command line, the /workers and /metrics answers it gave (recorded, fixtures/router/),
the spread verdict; Hypothesis for the parsers. The policy choice: plugin_utils/test_router_policy.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _router
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'router')


def fixture(name):
    with io.open(os.path.join(FIXTURES, name), encoding='utf-8') as handle:
        return handle.read()


SETTINGS = dict(host='172.31.250.11', port=30000, policy='round_robin', prometheus_host='127.0.0.1',
                prometheus_port=29000, worker_startup_check_interval=1, worker_startup_timeout=10,
                health_check_interval=2, health_failure_threshold=2, health_success_threshold=1,
                circuit_breaker_timeout=5, worker_urls=['http://b:8002', 'http://a:8002', 'http://a:8002'],
                extra_args=['--log-level', 'debug'])


def test_argv_sorted_urls_last_and_knobs_only_when_set():
    argv = _router.build_router_argv('/opt/r/bin/vllm-router', SETTINGS)
    assert argv[:5] == ['/opt/r/bin/vllm-router', '--host', '172.31.250.11', '--port', '30000']
    assert argv[-3:] == ['--worker-urls', 'http://a:8002', 'http://b:8002']
    assert '--cache-threshold' not in argv
    assert argv[argv.index('--log-level') + 1] == 'debug'
    assert argv[argv.index('--cb-timeout-duration-secs') + 1] == '5'
    with_knobs = _router.build_router_argv('x', dict(SETTINGS, cache_threshold=0.5, balance_abs_threshold=8))
    assert with_knobs[with_knobs.index('--cache-threshold') + 1] == '0.5'
    assert with_knobs[with_knobs.index('--balance-abs-threshold') + 1] == '8'
    # The same inventory in another host order renders the same command line.
    swapped = dict(SETTINGS, worker_urls=list(reversed(SETTINGS['worker_urls'])))
    assert _router.build_router_argv('x', swapped) == _router.build_router_argv('x', SETTINGS)


@pytest.mark.parametrize('extra,flag', [
    (['--policy', 'random'], '--policy'),
    (['--pol', 'random'], '--policy'),            # argparse takes an unambiguous prefix
    (['--api-key=secret'], '--api-key'),
    (['--api_key', 'x'], '--api-key'),
    (['--worker-u', 'http://x:1'], '--worker-urls'),
    (['--prometheus-port=1'], '--prometheus-port'),
    (['--cb-timeout', '9'], '--cb-timeout-duration-secs'),
])
def test_managed_flags_refused_also_abbreviated(extra, flag):
    assert _router.managed_flag_in(extra)[1] == flag


@pytest.mark.parametrize('extra', [[], ['--log-dir', '/var/log/r'], ['--max-payload-size', '1024'], ['--', '-x'],
                                   ['--request-timeout-secs', '60']])
def test_other_flags_pass(extra):
    assert _router.managed_flag_in(extra) is None


def test_workers_recorded_answer():
    workers = _router.parse_workers(fixture('workers-0.1.17.json'))
    assert workers == [{'url': 'http://172.31.250.12:8002', 'healthy': True},
                       {'url': 'http://172.31.250.11:8002', 'healthy': True}]
    assert _router.workers_problem(['http://172.31.250.11:8002/', 'http://172.31.250.12:8002'], workers) == ''


def test_workers_problem_names_missing_unhealthy_and_extra():
    workers = [{'url': 'http://a:1', 'healthy': False}, {'url': 'http://c:1', 'healthy': True}]
    problem = _router.workers_problem(['http://a:1', 'http://b:1'], workers)
    assert_names(problem, 'not listed: http://b:1', 'unhealthy: http://a:1', 'not wanted: http://c:1')


def test_workers_plain_strings_and_bad_shapes():
    assert _router.parse_workers('["http://a:1/"]') == [{'url': 'http://a:1', 'healthy': True}]
    for bad in ('{}', '{"workers": 3}', '[1]', '[{"uri": "x"}]'):
        with pytest.raises(ValueError):
            _router.parse_workers(bad)


def test_decisions_from_recorded_metrics():
    assert _router.decisions(fixture('metrics-cache_aware-0.1.17.txt')) == {'http://172.31.250.12:8002': 8}
    assert _router.rejected(fixture('metrics-cache_aware-0.1.17.txt')) == 0
    assert _router.rejected('vllm_router_kv_routing_inputs_total{transport="http",result="preparation_rejected"} 7\n'
                            'vllm_router_kv_routing_inputs_total{transport="http",result="render"} 9') == 7
    assert _router.decisions('') == {}


def test_a_sample_timestamp_is_not_counted_as_requests():
    text = ('vllm_router_kv_routing_inputs_total{transport="http",result="preparation_rejected"} 7 1764600000000\n'
            'vllm_router_processed_requests_total{worker="http://a:1/"} 3 1764600000000\n')
    assert _router.rejected(text) == 7
    assert _router.decisions(text) == {'http://a:1': 3}


def test_log_error_of_a_taken_metrics_port():
    line = _router.log_error(fixture('log-prometheus-port-taken-0.1.17.txt'))
    assert 'failed to install Prometheus metrics exporter' in line and 'Address already in use' in line
    assert _router.log_error('\x1b[32m INFO\x1b[0m Router ready') == ''


A, B = 'http://a:8002', 'http://b:8002'


def test_spread_verdict():
    assert _router.spread_problem('round_robin', {A: 4, B: 4}) == ''
    message = _router.spread_problem('cache_aware', {A: 0, B: 8})
    assert_names(message, 'all 8 requests', 'distinct prefixes', 'http://b:8002', 'policy cache_aware')
    assert 'first one on a tie' in message
    assert_names(_router.spread_problem('cache_aware', {A: 0, B: 8}, 8), '8 request(s)', 'preparation_rejected')
    assert _router.spread_problem('sticky_least_loaded', {A: 0, B: 8}) == ''
    assert _router.spread_problem('round_robin', {A: 1}) == ''
    assert _router.spread_problem('random', {A: 0, B: 0}) == ''  # nothing was counted: no verdict
    assert _router.decisions('vllm_router_processed_requests_total{worker="http://a:1"} 1e999') == {}


@given(st.text(max_size=300))
def test_parse_workers_only_value_error(text):
    try:
        out = _router.parse_workers(text)
    except ValueError:
        return
    assert all(isinstance(w['url'], str) and isinstance(w['healthy'], bool) for w in out)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(['workers', 'url', 'is_healthy',
                                                                                         'x']), c, max_size=3),
                    max_leaves=10))
def test_parse_workers_json_shapes(doc):
    try:
        out = _router.parse_workers(json.dumps(doc))
    except ValueError:
        return
    assert isinstance(out, list)


@given(st.lists(st.one_of(st.text(max_size=60),
                          st.builds(lambda w, n: 'vllm_router_processed_requests_total{worker="%s"} %s' % (w, n),
                                    st.text(max_size=10), st.one_of(st.integers(), st.text(max_size=5)))),
                max_size=6))
def test_decisions_never_raise(lines):
    out = _router.decisions('\n'.join(lines))
    assert all(isinstance(v, int) for v in out.values())


@given(st.lists(st.text(max_size=20), max_size=5))
def test_managed_flag_in_never_raises(words):
    found = _router.managed_flag_in(words)
    assert found is None or found[1] in _router.MANAGED_FLAGS
