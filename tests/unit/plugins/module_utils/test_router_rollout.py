# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure helpers of a rolling change (module vllm_rollout): what an instance has in flight from its /metrics
(recorded: vLLM 0.32 on CPU, fixtures/vllm/metrics_0_32_cpu_*.txt; the mock cluster's stand-in under load,
fixtures/vllm/metrics_standin_busy.txt), the router's worker paths, the recovery bound and its verdict."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import math
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _loadgen, _router
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'vllm')


def fixture(name):
    with io.open(os.path.join(FIXTURES, name), encoding='utf-8') as handle:
        return handle.read()


@pytest.mark.parametrize('name, expected', [
    ('metrics_0_32_cpu_after.txt', (0, 0)),         # real vLLM, idle; the _by_reason gauges are not added
    ('metrics_0_32_cpu_before.txt', (0, 0)),
    ('metrics_standin_busy.txt', (3, 2)),           # the stand-in with 3 running and 2 waiting
])
def test_in_flight_of_recorded_metrics(name, expected):
    assert _router.in_flight(fixture(name)) == expected
    assert _router.drained(_router.in_flight(fixture(name))) == (expected == (0, 0))


def test_in_flight_sums_engines_and_says_when_it_cannot_tell():
    text = ('vllm:num_requests_running{engine="0"} 1\nvllm:num_requests_running{engine="1"} 2\n'
            'vllm:num_requests_waiting{engine="0"} 0\n')
    assert _router.in_flight(text) == (3, 0)
    assert _router.in_flight('vllm:num_requests_running 0\n') == (0, 0)
    assert _router.in_flight('vllm_router_processed_requests_total 3\n') is None  # not a vLLM
    assert _router.in_flight('') is None
    assert _router.in_flight('vllm:num_requests_running NaN\nvllm:num_requests_waiting 0\n') == (None, 0)
    assert not _router.drained((None, 0)) and not _router.drained(None)


@given(st.text(max_size=400))
def test_in_flight_of_any_text_is_a_verdict(text):
    counts = _router.in_flight(text)
    assert counts is None or (len(counts) == 2 and all(c is None or isinstance(c, int) for c in counts))


@given(st.lists(st.tuples(st.sampled_from(_router.IN_FLIGHT_METRICS + ('vllm:num_requests_waiting_by_reason',)),
                          st.floats(allow_nan=True, allow_infinity=True, width=32)), max_size=6))
def test_in_flight_of_any_gauges(gauges):
    text = ''.join('%s{engine="%d"} %r\n' % (name, i, value) for i, (name, value) in enumerate(gauges))
    counts = _router.in_flight(text)
    names = set(n for n, _v in gauges if n in _router.IN_FLIGHT_METRICS)
    assert (counts is None) == (not names)
    if counts is not None and all(math.isfinite(v) for _n, v in gauges):
        assert counts == tuple(int(round(sum(v for n, v in gauges if n == m)))
                               for m in _router.IN_FLIGHT_METRICS)


def test_worker_path_quotes_the_whole_url():
    assert _router.worker_path('remove', 'http://172.31.250.12:8002/') == \
        '/remove_worker?url=http%3A%2F%2F172.31.250.12%3A8002'
    assert _router.worker_path('add', 'http://[::1]:8002') == '/add_worker?url=http%3A%2F%2F%5B%3A%3A1%5D%3A8002'
    with pytest.raises(ValueError):
        _router.worker_path('delete', 'http://a:1')


def test_listed_healthy():
    workers = [{'url': 'http://a:1', 'healthy': True}, {'url': 'http://b:1', 'healthy': False}]
    assert _router.listed_healthy(workers, ['http://a:1/', 'http://b:1', 'http://c:1']) == ['http://b:1', 'http://c:1']


@pytest.mark.parametrize('baseline, factor, slack, bound', [
    (0.040, 2.0, 0.5, 0.540),   # a fast baseline: the slack decides
    (2.0, 2.0, 0.5, 4.0),       # a slow one: the factor decides
    (0.0, 2.0, 0.0, 0.0),
])
def test_recovery_bound(baseline, factor, slack, bound):
    assert _router.recovery_bound(baseline, factor, slack) == pytest.approx(bound)


def test_recovery_verdict_names_the_peer_and_the_figures():
    figures = _router.recovery({'http://a:1': 0.04, 'http://b:1': 1.0}, {'http://a:1': 0.3, 'http://b:1': 2.5},
                               2.0, 0.5)
    assert figures['http://a:1'] == {'baseline': 0.04, 'after': 0.3, 'bound': 0.54, 'ok': True}
    assert not figures['http://b:1']['ok']
    assert_names(_router.recovery_problem(figures), 'http://b:1', 'TTFT p50 2.500 s', 'bound 2.000 s',
                 'baseline 1.000 s')
    silent = _router.recovery({'http://a:1': 0.04}, {'http://a:1': None}, 2.0, 0.5)
    assert_names(_router.recovery_problem(silent), 'http://a:1', 'answered none', 'baseline 0.040 s')
    unjudged = _router.recovery({}, {'http://c:1': 9.0}, 2.0, 0.5)
    assert unjudged['http://c:1']['ok'] and _router.recovery_problem(unjudged) == ''


def test_ttft_p50_of_results():
    results = [{'ok': True, 'ttft_ms': 40.0}, {'ok': True, 'ttft_ms': 60.0}, {'ok': False, 'error': 'HTTP 503: x'}]
    assert _loadgen.ttft_p50(results) == (0.05, 2, 1, 'HTTP 503: x')
    assert _loadgen.ttft_p50([]) == (None, 0, 0, '')
