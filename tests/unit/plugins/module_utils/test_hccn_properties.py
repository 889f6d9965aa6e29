# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Property tests (Hypothesis) over the hccn_tool answers, hccn.conf, the npu-smi table and list, and the
key=value files the pre-flight reads: arbitrary text and bytes go in, and a parser returns its documented shape
(or raises the collection's ParseError), a judge returns a verdict, and nothing else comes out.

The strategies mix random text with fragments of the real formats (docs/hccn_tool-formats.md), so the examples
get past the first line of each parser. Bounded: the CI profile of tests/unit/conftest.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _hccn, _npu_smi, _preflight
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import ParseError

HCCN_FRAGMENTS = st.sampled_from([
    'link status: UP', 'link status: DOWN', 'net health status: Success', 'net health status: Init',
    'net health status: Fault', 'ipaddr:10.20.0.2', 'netmask:255.255.255.0', 'netdetect address: 10.20.0.1',
    'default gateway:10.20.0.1, Iface:eth0', 'dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[1]',
    'Chassis ID TLV', 'Port ID TLV', '\tIfname: 400GE1/1/1', 'System Name TLV', 'recv time out seq=0',
    '3 packets transmitted, 3 received, 0.00% packet loss', '64 bytes from 10.20.0.3: icmp_seq=1 time=0.05 ms',
    'Command execute failed!', 'hccn_tool is busy, please try again later', 'Invalid device id', 'dev_id:0',
    'Destination Host Unreachable', 'Message too long', '', ' ', '\x00', '\ufffd', 'ipaddr:', 'link status:',
])
HCCN_LINES = st.lists(st.one_of(HCCN_FRAGMENTS, st.text(max_size=20)), max_size=12)
HCCN_TEXT = st.one_of(st.text(max_size=300), HCCN_LINES.map('\n'.join))
RAW = st.one_of(HCCN_TEXT, st.binary(max_size=200), st.none())
STATES = ('ok', 'fail', 'transient', 'busy', 'error')

CONF_LINE = st.one_of(
    st.text(max_size=40),
    st.builds(lambda k, d, v, eol: '%s_%s%s%s' % (k, d, v, eol),
              st.sampled_from(['address', 'netmask', 'netdetect', 'gateway', 'send_arp_status', 'tls_enable', 'mtu',
                               'bond_address', 'x']),
              st.sampled_from(['0', '7', '15', '16', '-1', '', '00', 'a']),
              st.sampled_from(['=10.20.0.2', ' = 10.20.0.2', '=', '', '=1', '==', '=255.255.255.0']),
              st.sampled_from(['', '\r', ' ', '\t'])),
    st.sampled_from(['# comment', '', '[section]']),
)

SMI_LINE = st.one_of(
    st.text(max_size=60),
    st.sampled_from([
        '| npu-smi 23.0.rc3                 Version: 23.0.rc3                                              |',
        '+---------------------------+---------------+----------------------------------------------------+',
        '| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|',
        '| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |',
        '+===========================+===============+====================================================+',
        '| 0     910B3               | OK            | 93.6        40                0    / 0             |',
        '| 0                         | 0000:C1:00.0  | 0           0    / 0          3378 / 65536         |',
        '| 1     910B3               | Alarm         | NA          NA                NA   / NA            |',
        '| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |',
        '| No running processes found in NPU 0                                                            |',
        '| 0       0                 | 12345         | python3                  | 60000                   |',
        '\tNPU ID                         : 0', '\tChip Count                     : 1', 'Total Count : 8',
    ]),
)
SMI_TEXT = st.one_of(st.text(max_size=300), st.lists(SMI_LINE, max_size=14).map('\n'.join))


@settings(max_examples=120, deadline=None)
@given(check=st.sampled_from(_hccn.CHECKS + ('ping',)), rc=st.one_of(st.integers(-9, 255), st.none()),
       stdout=RAW, stderr=RAW)
def test_every_hccn_answer_gets_a_verdict(check, rc, stdout, stderr):
    verdict = _hccn.judge(check, rc, stdout, stderr)
    assert set(verdict) == {'check', 'ok', 'state', 'value', 'message', 'raw'}
    assert verdict['check'] == check and isinstance(verdict['ok'], bool) and verdict['state'] in STATES
    assert verdict['ok'] == (verdict['state'] == 'ok')
    assert isinstance(verdict['message'], str) and isinstance(verdict['raw'], str)
    if not verdict['ok']:
        assert verdict['message'], verdict


@settings(max_examples=80, deadline=None)
@given(text=HCCN_TEXT)
def test_each_hccn_parser_returns_its_shape_for_any_text(text):
    for parse in (_hccn.parse_link, _hccn.parse_net_health, _hccn.parse_ip, _hccn.parse_netdetect,
                  _hccn.parse_gateway, _hccn.parse_tls, _hccn.parse_lldp):
        try:
            value = parse(text)
        except ParseError:
            continue
        assert isinstance(value, (dict, str, type(None))), (parse.__name__, value)


@settings(max_examples=80, deadline=None)
@given(rc=st.integers(-9, 255), stdout=RAW, stderr=RAW)
def test_a_ping_answer_gives_counts_that_add_up(rc, stdout, stderr):
    result = _hccn.parse_ping(rc, stdout, stderr)
    assert isinstance(result, dict) and isinstance(result['rtt_ms'], list)
    sent, got = result['transmitted'], result['received']
    for n in (sent, got):
        assert n is None or (isinstance(n, int) and n >= 0)
    assert all(isinstance(t, float) for t in result['rtt_ms'])


@settings(max_examples=120, deadline=None)
@given(st.lists(CONF_LINE, max_size=16).map('\n'.join))
def test_hccn_conf_gives_devices_by_int_id_and_names_every_bad_line(text):
    conf = _hccn.parse_hccn_conf(text)
    assert {'devices', 'other', 'errors', 'warnings'} <= set(conf)
    for dev, keys in conf['devices'].items():
        assert isinstance(dev, int) and dev >= 0 and isinstance(keys, dict)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items())
    assert all(isinstance(m, str) and m for m in conf['errors'] + conf['warnings'])


@settings(max_examples=120, deadline=None)
@given(text=SMI_TEXT, listed=st.one_of(st.none(), st.lists(st.integers(-1, 70), max_size=8)))
def test_npu_smi_table_and_list_give_their_shape_or_a_named_problem(text, listed):
    info = _npu_smi.parse_info(text)
    assert {'version', 'npus', 'processes', 'idle_npus'} <= set(info)
    for npu in info['npus']:
        assert isinstance(npu['npu'], int) and isinstance(npu['health'], (str, type(None)))
    for proc in info['processes']:
        assert proc['pid'] is None or isinstance(proc['pid'], int)
    problem = _npu_smi.table_problem(text, info, listed)
    assert problem is None or (isinstance(problem, str) and problem.startswith('npu-smi'))
    listing = _npu_smi.parse_list(text)
    assert listing['total'] is None or isinstance(listing['total'], int)
    for npu in listing['npus']:
        assert isinstance(npu['npu'], int) and (npu['chip_count'] is None or isinstance(npu['chip_count'], int))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=30),
                          st.builds('{}={}'.format, st.from_regex(r'\A[A-Za-z_][A-Za-z0-9_]{0,10}\Z'),
                                    st.text(max_size=12))), max_size=10).map('\n'.join))
def test_key_value_files_give_string_pairs_first_one_wins(text):
    values = _preflight.parse_key_values(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())
    assert all('\n' not in v for v in values.values())
