# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Property-based tests (Hypothesis) of the parsers of text the collection reads from tools and servers: the
AISBench CSV / JSON results, the Prometheus text of /metrics, and the /proc readers of the pre-flight.

Arbitrary text goes in; each parser returns its documented shape or raises the collection's own ParseError, and
nothing else comes out (no other exception, no value of another type). The number of examples is bounded so the
suite stays quick (tests/unit/conftest.py's profile)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _aisbench, _preflight, _prometheus
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import ParseError
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

# Text that looks a little like the real thing gets further into the parsers than random characters alone.
CSV_CELLS = st.one_of(st.text(max_size=12), st.sampled_from(['TTFT', 'E2EL', 'Stage', 'total', 'Average', 'N', 'P90',
                                                             '2006.0 ms', '1e999', 'nan', '-inf', '8', ',', '"']))
CSV_TEXT = st.one_of(
    st.text(max_size=400),
    st.lists(st.lists(CSV_CELLS, max_size=8), max_size=8).map(
        lambda rows: '\r\n'.join(','.join(r) for r in rows)),
)
JSON_TEXT = st.one_of(
    st.text(max_size=200),
    st.recursive(st.none() | st.booleans() | st.floats(allow_nan=True) | st.text(max_size=10) | st.integers(),
                 lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children,
                                                                                   max_size=4),
                 max_leaves=12).map(lambda v: __import__('json').dumps(v)),
)
PROM_LINE = st.one_of(
    st.text(max_size=80),
    st.builds(lambda n, labels, v: '%s%s %s' % (n, labels, v),
              st.from_regex(r'\A[a-zA-Z_:][a-zA-Z0-9_:]{0,20}\Z'),
              st.sampled_from(['', '{}', '{a="x"}', '{a="x",b="y\\"z"}', '{a=', '{a="\\n"}', '{=}']),
              st.sampled_from(['1', '0.5', 'NaN', '+Inf', '-Inf', '1e999', 'x', '-', ''])),
)


def _is_pair(value):
    return (isinstance(value, tuple) and len(value) == 2 and (value[0] is None or isinstance(value[0], float))
            and isinstance(value[1], str))


@settings(max_examples=150, deadline=None)
@given(CSV_TEXT)
def test_aisbench_csv_gives_tables_of_finite_values_or_a_parse_error(text):
    try:
        table = _aisbench.parse_perf_csv(text)
    except ParseError:
        return
    assert isinstance(table, dict)
    for stages in table.values():
        for row in stages.values():
            for pair in row.values():
                assert _is_pair(pair)
                assert pair[0] is None or math.isfinite(pair[0])
    summary = _aisbench.to_summary(table, {})
    assert isinstance(summary, dict) and 'ttft_ms' in summary


@settings(max_examples=150, deadline=None)
@given(JSON_TEXT)
def test_aisbench_json_gives_a_table_or_a_parse_error(text):
    try:
        table = _aisbench.parse_perf_json(text)
    except ParseError:
        return
    assert isinstance(table, dict)
    for stages in table.values():
        assert all(_is_pair(pair) for pair in stages.values())
    assert isinstance(_aisbench.to_summary({}, table), dict)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=30), st.floats(), st.integers(), st.booleans(), st.none()))
def test_aisbench_values_are_finite_numbers_or_none(value):
    number, unit = _aisbench.parse_value(value)
    assert number is None or (isinstance(number, float) and math.isfinite(number))
    assert isinstance(unit, str)


@settings(max_examples=200, deadline=None)
@given(st.lists(PROM_LINE, max_size=12).map('\n'.join))
def test_prometheus_text_gives_float_samples_and_round_trips_its_keys(text):
    samples = _prometheus.parse(text)
    assert isinstance(samples, dict)
    for key, value in samples.items():
        assert isinstance(value, float)
        name, labels = _prometheus.split_series(key)
        assert _prometheus.series_key(name, labels) == key


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.from_regex(r'\A[a-zA-Z_][a-zA-Z0-9_]{0,8}\Z'), st.text(max_size=10), max_size=4))
@example({'A': '\\n'})  # a backslash then n: found by this property (the unescaping ran in the wrong order)
def test_prometheus_labels_round_trip_whatever_they_hold(labels):
    key = _prometheus.series_key('m', labels)
    assert _prometheus.split_series(key) == ('m', labels)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=300),
                 st.lists(st.tuples(st.sampled_from(['MemTotal', 'HugePages_Total', 'Hugepagesize', 'x y', '']),
                                    st.sampled_from(['1', '12 kB', '-1', 'kB', '', '٣']), ), max_size=6)
                 .map(lambda rows: '\n'.join('%s: %s' % r for r in rows))))
def test_meminfo_gives_whole_numbers_of_bytes(text):
    info = _preflight.parse_meminfo(text)
    assert isinstance(info, dict)
    assert all(isinstance(v, int) and v >= 0 for v in info.values())


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=300),
                 st.lists(st.lists(st.sampled_from(['0:', '0100007F:1F90', '00000000000000000000000000000000:0050',
                                                    'ZZ:1', '0A', '07', '0', '1234', 'x', ':']),
                                   min_size=0, max_size=12).map(' '.join), max_size=5)
                 .map(lambda rows: 'header\n' + '\n'.join(rows))))
def test_proc_net_tcp_gives_listening_sockets_with_ports_in_range(text):
    for sock in _preflight.parse_net_tcp(text):
        assert set(sock) == {'address', 'port', 'inode', 'uid'}
        assert isinstance(sock['address'], str) and isinstance(sock['port'], int)


@pytest.mark.parametrize('text', ['', '\x00\x00', 'Error: no results', '{"a": 1', '[1, 2]', '"text"'])
def test_aisbench_json_that_is_not_an_object_is_a_parse_error(text):
    with pytest.raises(ParseError, match='not the JSON'):
        _aisbench.parse_perf_json(text)


def test_an_aisbench_result_file_that_is_not_utf8_is_named(tmp_path):
    run = tmp_path / '20260101_000000' / 'performances' / _aisbench.MODEL_ABBR
    run.mkdir(parents=True)
    (run / 'ds.csv').write_bytes(b'\xff\xfe\x00garbage')
    with pytest.raises(ParseError) as exc:
        _aisbench.read_results(str(tmp_path))
    assert_names(str(exc.value), 'AISBench result', 'ds.csv', 'cannot be read')
