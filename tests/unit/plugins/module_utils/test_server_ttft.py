# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The server's own TTFT over a step (``_loadgen.histogram``, ``histogram_quantile``, ``server_ttft``): over
/metrics text recorded from a real vLLM engine (fixtures/vllm/, their source in the files), over the vllm
stand-in's own exposition, and Hypothesis properties of the bucket arithmetic."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _loadgen, _prometheus

from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import read_answer

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'mock', 'vllm')
# The client TTFTs (ms) of the recorded step (the fixtures' note), measured by the built-in client.
RECORDED_CLIENT_MS = [252.282, 113.261, 203.755, 246.795, 282.117, 401.729, 443.895, 443.78]
TTFT = 'vllm:time_to_first_token_seconds'


def recorded(which):
    return _prometheus.parse(read_answer('vllm/metrics_0_32_cpu_%s.txt' % which)['file'])


def test_real_vllm_exposition_gives_the_steps_server_ttft():
    before, after = recorded('before'), recorded('after')
    # the real engine exposes the histogram with vLLM's buckets, labels engine / model_name, and a _created gauge
    assert before['vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="qwen"}'] == 203.0
    assert 'vllm:time_to_first_token_seconds_created{engine="0",model_name="qwen"}' in before
    server = _loadgen.server_ttft(_loadgen.diff(before, after))
    assert server == {'count': 8, 'mean_ms': 287.702, 'p50_ms': 250.0, 'p90_ms': 450.0}
    # the client saw the same 8 requests 3.7% slower on average (loopback, concurrency 4)
    client_mean = sum(RECORDED_CLIENT_MS) / len(RECORDED_CLIENT_MS)
    assert 1.0 < client_mean / server['mean_ms'] < 1.10


def test_histogram_of_the_recorded_delta_has_vllms_buckets():
    hist = _loadgen.histogram(_loadgen.diff(recorded('before'), recorded('after')), TTFT)
    bounds = [b for b, _c in hist['buckets']]
    assert bounds[:8] == [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1] and math.isinf(bounds[-1])
    assert hist['count'] == 8 and hist['buckets'][-1][1] == 8
    # _created (a gauge of the creation time) and other histograms are not mixed in
    assert abs(hist['sum'] - 2.301614) < 1e-6


def test_no_histogram_and_no_observation():
    assert _loadgen.server_ttft({}) is None
    assert _loadgen.server_ttft({'vllm:prefix_cache_hits_total': 3.0}) is None
    empty = _loadgen.diff(recorded('after'), recorded('after'))
    assert _loadgen.server_ttft(empty) == {'count': 0, 'mean_ms': None, 'p50_ms': None, 'p90_ms': None}


def test_a_label_filter_and_several_engines_sum():
    delta = {
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1"}': 1.0,
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf"}': 2.0,
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1"}': 1.0,
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf"}': 2.0,
        'vllm:time_to_first_token_seconds_sum{engine="0"}': 0.3,
        'vllm:time_to_first_token_seconds_sum{engine="1"}': 0.5,
        'vllm:time_to_first_token_seconds_count{engine="0"}': 2.0,
        'vllm:time_to_first_token_seconds_count{engine="1"}': 2.0,
    }
    assert _loadgen.server_ttft(delta) == {'count': 4, 'mean_ms': 200.0, 'p50_ms': 100.0, 'p90_ms': 100.0}
    one = _loadgen.histogram(delta, TTFT, engine='1')
    assert one['count'] == 2.0 and one['sum'] == 0.5 and one['buckets'] == [(0.1, 1.0), (float('inf'), 2.0)]


@pytest.mark.parametrize('q, expected', [(0.5, 0.25), (0.25, 0.1), (0.9, 0.85), (1.0, 1.0), (0.0, 0.0)])
def test_quantiles_interpolate_like_prometheus(q, expected):
    # 4 observations: 1 in (0, 0.1], 1 in (0.1, 0.25], 2 in (0.25, 1.0]
    buckets = [(0.1, 1.0), (0.25, 2.0), (1.0, 4.0), (float('inf'), 4.0)]
    assert _loadgen.histogram_quantile(q, buckets) == pytest.approx(expected)


def test_a_rank_in_the_inf_bucket_gives_the_highest_finite_bound():
    assert _loadgen.histogram_quantile(0.9, [(0.1, 1.0), (1.0, 1.0), (float('inf'), 10.0)]) == 1.0


def test_the_standins_exposition_reads_the_same_way():
    sys.path.insert(0, STANDIN)
    try:
        from vllm_standin.metrics import Metrics
    finally:
        sys.path.remove(STANDIN)
    metrics = Metrics('qwen')
    before = _prometheus.parse(metrics.render())
    for value in (0.05, 0.07, 0.2, 0.3):
        metrics.observe('ttft', value)
    server = _loadgen.server_ttft(_loadgen.diff(before, _prometheus.parse(metrics.render())))
    assert server['count'] == 4 and server['mean_ms'] == 155.0
    # p50: rank 2 in (0.06, 0.08] -> 80 ms; p90: rank 3.6 in (0.25, 0.5] -> 0.25 + 0.25 * 0.6 = 400 ms
    assert server['p50_ms'] == pytest.approx(80.0) and server['p90_ms'] == pytest.approx(400.0)


BOUNDS = st.lists(st.floats(min_value=0.0005, max_value=3000, allow_nan=False), min_size=1, max_size=12,
                  unique=True).map(sorted)


@st.composite
def observations(draw):
    bounds = draw(BOUNDS)
    values = draw(st.lists(st.floats(min_value=0.0, max_value=4000, allow_nan=False), min_size=1, max_size=40))
    buckets = [(b, float(sum(1 for v in values if v <= b))) for b in bounds] + [(float('inf'), float(len(values)))]
    return bounds, values, buckets


@settings(max_examples=150, deadline=None)
@given(observations(), st.floats(min_value=0.0, max_value=1.0))
def test_quantile_lies_in_the_bucket_that_holds_the_rank(obs, q):
    bounds, values, buckets = obs
    value = _loadgen.histogram_quantile(q, buckets)
    assert value is not None and 0.0 <= value <= bounds[-1]
    # the true q-quantile of the observations is in the same bucket (or beyond the last finite bound)
    true = sorted(values)[max(0, int(math.ceil(q * len(values))) - 1)]
    upper = next((b for b in bounds if true <= b), None)
    if upper is not None and q > 0:
        lower = max([0.0] + [b for b in bounds if b < upper])
        assert lower - 1e-9 <= value <= upper + 1e-9


@settings(max_examples=150, deadline=None)
@given(observations(), st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=1.0))
def test_quantile_is_monotonic_in_q(obs, q1, q2):
    _bounds, _values, buckets = obs
    low, high = sorted((q1, q2))
    assert _loadgen.histogram_quantile(low, buckets) <= _loadgen.histogram_quantile(high, buckets) + 1e-9


@settings(max_examples=150, deadline=None)
@given(observations(), st.sampled_from(['engine="0",model_name="qwen"', 'model_name="m",engine="3"', '']))
def test_server_ttft_of_rendered_histograms_matches_the_observations(obs, labels):
    bounds, values, buckets = obs

    def series(suffix, extra=''):
        inner = ','.join(x for x in (labels, extra) if x)
        return _prometheus.series_key(*_prometheus.split_series('%s%s{%s}' % (TTFT, suffix, inner)))

    text = '\n'.join(['%s %r' % (series('_bucket', 'le="%s"' % ('+Inf' if math.isinf(b) else repr(b))), c)
                      for b, c in buckets]
                     + ['%s %r' % (series('_sum'), sum(values)), '%s %r' % (series('_count'), float(len(values)))])
    server = _loadgen.server_ttft(_prometheus.parse(text))
    assert server['count'] == len(values)
    assert server['mean_ms'] == pytest.approx(1000.0 * sum(values) / len(values), abs=1e-3)
    assert server['p50_ms'] <= server['p90_ms'] + 1e-6


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=60), st.floats(allow_nan=True, allow_infinity=True), max_size=12))
def test_server_ttft_never_raises_on_arbitrary_series(samples):
    out = _loadgen.server_ttft(samples)
    assert out is None or set(out) == {'count', 'mean_ms', 'p50_ms', 'p90_ms'}
