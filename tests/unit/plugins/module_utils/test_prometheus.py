# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one Prometheus text parser (module_utils/_prometheus.py): the text format's cases (comments,
timestamps, escaped label values, NaN and infinities, malformed lines), the recorded answers of vLLM and
vllm-router, and a Hypothesis property: rendered samples read back as they were written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import math
import os

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _prometheus
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import FIXTURES_DIR, read_answer

ROUTER = os.path.join(FIXTURES_DIR, 'router')

TEXT = r'''# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="qwen"} 2048.0
  # an indented comment
http_requests_total{method="post",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"}    3   1395066363000
weird{path="a \"quoted\" \\ value",x="1"} NaN 1700000000000
commas{list="a,b,c",brace="}",space="x y"} 7
trailing_comma{a="1",} +Inf
minus_inf -Inf
spaced {a="1"} 4

not a sample line
bad_value{a="1"} seven
bad_label{a=1} 1
twice{a="1",a="2"} 1
no_blank{a="1"}5
too_many 1 2 3
float_timestamp 1 1.5
'''


def test_a_timestamp_is_never_the_value():
    samples = _prometheus.parse(TEXT)
    assert samples['http_requests_total{code="200",method="post"}'] == 1027.0
    assert samples['http_requests_total{code="400",method="post"}'] == 3.0
    line = _prometheus.parse_line('http_requests_total{method="post",code="200"} 1027 1395066363000')
    assert line == ('http_requests_total', {'method': 'post', 'code': '200'}, 1027.0, 1395066363000)
    assert _prometheus.parse_line('up 1')[3] is None


def test_escaped_quotes_commas_and_braces_stay_in_the_label_value():
    samples = _prometheus.parse(TEXT)
    assert math.isnan(samples['weird{path="a \\"quoted\\" \\\\ value",x="1"}'])
    assert _prometheus.split_series('weird{path="a \\"quoted\\" \\\\ value",x="1"}') == (
        'weird', {'path': 'a "quoted" \\ value', 'x': '1'})
    name, labels = _prometheus.split_series([k for k in samples if k.startswith('commas')][0])
    assert labels == {'list': 'a,b,c', 'brace': '}', 'space': 'x y'} and samples[
        _prometheus.series_key(name, labels)] == 7.0


def test_infinities_comments_and_malformed_lines():
    samples = _prometheus.parse(TEXT)
    assert samples['trailing_comma{a="1"}'] == float('inf') and samples['minus_inf'] == float('-inf')
    assert samples['spaced{a="1"}'] == 4.0
    assert sorted(samples) == sorted([
        'vllm:prefix_cache_queries_total{engine="0",model_name="qwen"}',
        'http_requests_total{code="200",method="post"}', 'http_requests_total{code="400",method="post"}',
        'weird{path="a \\"quoted\\" \\\\ value",x="1"}',
        'commas{brace="}",list="a,b,c",space="x y"}', 'trailing_comma{a="1"}', 'minus_inf', 'spaced{a="1"}'])


def test_prefixes_and_sums():
    kept = sorted(_prometheus.parse(TEXT, ['http_']))
    assert kept == ['http_requests_total{code="200",method="post"}', 'http_requests_total{code="400",method="post"}']
    samples = _prometheus.parse(TEXT)
    assert _prometheus.metric_sum(samples, 'http_requests_total') == 1030.0
    assert _prometheus.metric_sum(samples, 'http_requests_total', code=400) == 3.0
    assert _prometheus.metric_sum(samples, 'absent') is None


@pytest.mark.parametrize('text', ['', None, '# only a comment\n', '\n\n'])
def test_nothing_to_read(text):
    assert _prometheus.parse(text) == {}


def test_recorded_answers_of_vllm_and_the_router():
    vllm = _prometheus.parse(read_answer('vllm/metrics_0_32_cpu_after.txt')['file'])
    assert vllm and all(isinstance(v, float) for v in vllm.values())
    assert any(k.startswith('vllm:time_to_first_token_seconds_bucket{') for k in vllm)
    with io.open(os.path.join(ROUTER, 'metrics-cache_aware-0.1.17.txt'), encoding='utf-8') as handle:
        router = _prometheus.parse(handle.read())
    assert _prometheus.metric_sum(router, 'vllm_router_processed_requests_total') == 8.0


@pytest.mark.parametrize('text', ['1', '-2.5e3', '.5', 'NaN', 'nan', '+Inf', '-Inf', 'Inf', '1E-3'])
def test_numbers(text):
    value = _prometheus.number(text)
    assert isinstance(value, float)


@pytest.mark.parametrize('text', ['', 'x', '1_000', '--1', '1.2.3', '0x10'])
def test_not_numbers(text):
    with pytest.raises(ValueError):
        _prometheus.number(text)


LABEL_VALUES = st.text(st.characters(blacklist_categories=('Cs',)), max_size=12)
SAMPLE = st.tuples(st.from_regex(r'\A[a-zA-Z_:][a-zA-Z0-9_:]{0,12}\Z'),
                   st.dictionaries(st.from_regex(r'\A[a-zA-Z_][a-zA-Z0-9_]{0,6}\Z'), LABEL_VALUES, max_size=3),
                   st.one_of(st.floats(allow_nan=False), st.integers(-10 ** 12, 10 ** 12).map(float)),
                   st.one_of(st.none(), st.integers(-2 ** 62, 2 ** 62)))


def render(name, labels, value, timestamp):
    text = _prometheus.series_key(name, labels)
    value = {float('inf'): '+Inf', float('-inf'): '-Inf'}.get(value, repr(value))
    return '%s %s%s' % (text, value, '' if timestamp is None else ' %d' % timestamp)


@settings(max_examples=200, deadline=None)
@given(st.lists(SAMPLE, max_size=8))
@example([(':', {'A': '\x85'}, 0.0, None)])  # found by this property: splitlines() cut the line in the label
def test_rendered_samples_read_back_as_written_timestamps_aside(rows):
    text = '# HELP m a metric\n# TYPE m counter\n' + '\n'.join(render(*row) for row in rows)
    read = list(_prometheus.samples(text))
    assert read == rows
    expected = dict((_prometheus.series_key(name, labels), value) for name, labels, value, _ts in rows)
    assert _prometheus.parse(text) == expected
