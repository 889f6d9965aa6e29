# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input to the network modules (docs/bad-input.md): npu-smi output that is not what npu-smi prints, an
/etc/hccn.conf that is not a readable text file or that hccn_tool would read differently from what it seems to say,
and arguments out of range. Each is a clear failure or a finding that names the file or option, never a wrong
success, a traceback or a hang. Tool answers come from recorded fixtures (network_node.Node)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.ascend.kvpool.plugins.modules import hccn_facts, hccn_ping, npu_smi_facts
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import read_answer
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.network_node import ONE_NPU_LIST, Node, run_module


@pytest.fixture
def conf(tmp_path):
    """An hccn.conf that agrees with the recorded ``-ip -g`` answer of every NPU."""
    path = tmp_path / 'hccn.conf'
    path.write_text(''.join('address_%d=29.1.112.213\n' % d for d in range(8)))
    return str(path)


def answer(stdout, rc=0, stderr=''):
    return {'rc': rc, 'stdout': stdout, 'stderr': stderr}


TABLE = read_answer('npu_smi_info_910b2_running.txt')['stdout']


def smi(monkeypatch, capsys, info, smi_list='npu_smi_list_compact.txt'):
    return run_module(npu_smi_facts, {'topology': False}, Node(smi_info=info, smi_list=smi_list), monkeypatch, capsys)


# --- npu-smi output that is not what npu-smi prints --------------------------------------------------------------
@pytest.mark.parametrize('stdout, expected', [
    ('', 'printed nothing'),
    ('\x00\xff\xfe garbage \x1b[31m', 'printed no NPU table'),
    ('Error: the device is not ready\n', 'printed no NPU table (exit code 0): Error: the device is not ready'),
    ('x' * 10000000, 'printed no NPU table'),
])
def test_npu_smi_output_without_a_table_fails_instead_of_zero_npus(monkeypatch, capsys, stdout, expected):
    res = smi(monkeypatch, capsys, answer(stdout))
    assert res['failed'] and expected in res['msg'] and len(res['msg']) < 600
    assert 'driver_loaded' not in res


def test_a_table_without_its_health_column_is_not_read_as_healthy(monkeypatch, capsys):
    # The recorded table with its Health header renamed: the column is not one the collection knows.
    res = smi(monkeypatch, capsys, answer(TABLE.replace('Health', 'State ')))
    assert res['failed'] and 'without a Health column' in res['msg']


def test_a_table_cut_short_names_the_npus_it_lacks(monkeypatch, capsys):
    lines = TABLE.split('\n')
    cut = '\n'.join(lines[:len(lines) // 3])
    res = smi(monkeypatch, capsys, answer(cut))
    assert res['failed']
    assert_names(res['msg'], 'NPUs 0, 1, 2, 3, 4, 5, 6, 7', 'but the table', 'missing')


def test_npu_health_with_garbage_is_a_finding_not_a_pass(monkeypatch, capsys, conf):
    node = Node(smi_info=answer('Error: the device is not ready\n'))
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'npu_health': True, 'checks': ['link']}, node,
                     monkeypatch, capsys)
    bad = [f for f in res['failed_checks'] if f['check'] == 'npu_health']
    assert bad and bad[0]['npu'] is None and 'printed no NPU table' in bad[0]['message']


def test_npu_health_of_an_npu_missing_from_the_table_is_unknown(monkeypatch, capsys, conf):
    node = Node(smi_info='npu_smi_info_910b4_single.txt', smi_list=ONE_NPU_LIST)
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'npu_health': True, 'checks': ['link'], 'devices': [0, 5]},
                     node, monkeypatch, capsys)
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(5, 'npu_health')]


def test_npu_ids_out_of_range_from_npu_smi_are_named_and_not_queried(monkeypatch, capsys, conf):
    listing = answer('\tTotal Count : 2\n\tNPU ID : 0\n\tChip Count : 1\n\tNPU ID : 99\n\tChip Count : 1\n')
    node = Node(smi_list=listing)
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'checks': ['link']}, node, monkeypatch, capsys)
    assert res['device_ids'] == [0]
    bad = [f for f in res['failed_checks'] if f['check'] == 'device']
    assert bad and 'NPU ids 99, outside 0-15' in bad[0]['message']
    assert not any(c[:3] == [c[0], '-i', '99'] for c in node.calls)


# --- /etc/hccn.conf ------------------------------------------------------------------------------------------------
def conf_findings(monkeypatch, capsys, path):
    res = run_module(hccn_facts, {'hccn_conf_path': str(path), 'devices': [0], 'checks': ['link', 'ip']}, Node(),
                     monkeypatch, capsys)
    assert not res.get('failed'), res
    return [f for f in res['failed_checks'] if f['check'] == 'hccn_conf'], res


def test_hccn_conf_that_is_a_directory_is_named_as_such(monkeypatch, capsys, tmp_path):
    findings, res = conf_findings(monkeypatch, capsys, tmp_path)
    assert len(findings) == 1 and 'is a directory, not a file' in findings[0]['message']
    assert 'missing' not in findings[0]['message']


def test_hccn_conf_that_is_a_fifo_is_refused_without_hanging(monkeypatch, capsys, tmp_path):
    fifo = tmp_path / 'hccn.conf'
    os.mkfifo(str(fifo))
    findings, dummy = conf_findings(monkeypatch, capsys, fifo)
    assert 'not a regular file' in findings[0]['message'] and 'nothing can hang' in findings[0]['message']


def test_hccn_conf_that_cannot_be_read_says_so(monkeypatch, capsys, tmp_path):
    path = tmp_path / 'hccn.conf'
    path.write_text('address_0=29.1.2.81\n')
    real_open = os.open

    def deny(name, *args, **kwargs):
        if name == str(path):
            raise PermissionError(13, 'Permission denied', name)
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(os, 'open', deny)  # root reads any file: the refusal is what a non-root user meets
    findings, dummy = conf_findings(monkeypatch, capsys, path)
    assert_names(findings[0]['message'], 'cannot be read', 'Permission denied')


def test_hccn_conf_that_is_not_utf8_names_the_file_and_the_byte(monkeypatch, capsys, tmp_path):
    path = tmp_path / 'hccn.conf'
    path.write_bytes(b'address_0=29.1.2.81\n\xff\xfe\n')
    findings, dummy = conf_findings(monkeypatch, capsys, path)
    assert_names(findings[0]['message'], str(path), 'not UTF-8 text', 'byte 0xff', 'offset 20')


def test_hccn_conf_larger_than_any_is_not_read(monkeypatch, capsys, tmp_path):
    path = tmp_path / 'hccn.conf'
    path.write_bytes(b'#' * (2 << 20))
    findings, dummy = conf_findings(monkeypatch, capsys, path)
    assert_names(findings[0]['message'], 'not read', 'is it the right file?')


@pytest.mark.parametrize('text, expected', [
    ('address_0=29.1.112.213\naddress_0=29.1.112.214\n', 'duplicate address_0=29.1.112.214 ignored'),
    ('address_0=29.1.112.213\r\nnetmask_0=255.255.0.0\r\n', 'CRLF line ends'),
    ('address_0 = 29.1.112.213\n', "blanks around 'address_0' are not stripped"),
    ('address_0=29.1.112.213\nthis is not a setting\n', "a line without key=value"),
])
def test_hccn_conf_lines_hccn_tool_reads_differently_are_findings(monkeypatch, capsys, tmp_path, text, expected):
    path = tmp_path / 'hccn.conf'
    path.write_text(text, newline='')
    findings, dummy = conf_findings(monkeypatch, capsys, path)
    assert any(expected in f['message'] and str(path) in f['message'] for f in findings), findings


# --- arguments -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('args, expected', [
    ({'command_timeout': 0}, 'command_timeout must be at least 1 second'),
    ({'command_timeout': -5}, 'command_timeout must be at least 1 second'),
    ({'busy_retries': -1}, 'busy_retries must be 0 or more'),
    ({'transient_wait': -1.0}, 'transient_wait=-1.0 must be a finite number at least 0 and at most 3600'),
])
def test_hccn_facts_arguments_out_of_range(monkeypatch, capsys, args, expected):
    res = run_module(hccn_facts, args, Node(), monkeypatch, capsys)
    assert res['failed'] and expected in res['msg']


@pytest.mark.parametrize('wait', [float('inf'), float('nan'), 3601.0])
def test_hccn_facts_refuses_a_transient_wait_that_never_ends_or_is_no_number(monkeypatch, capsys, wait):
    """Issue 32: .inf re-queried forever, NaN was silently no wait; both fail naming the option, before any query."""
    node = Node()
    res = run_module(hccn_facts, {'transient_wait': wait}, node, monkeypatch, capsys)
    assert res['failed'] and node.calls == []
    assert_names(res['msg'], 'transient_wait=', 'must be a finite number at least 0 and at most 3600',
                 'npu_network_transient_wait')


TARGET = {'device': 0, 'address': '29.1.2.81', 'label': 'node2/npu0'}


@pytest.mark.parametrize('change, expected', [
    ({'address': ''}, "targets[0] (node2/npu0).address='' is not an IPv4 address"),
    ({'address': '-i'}, "address='-i' is not an IPv4 address"),
    ({'address': '29.1.2.81\n-g'}, 'is not an IPv4 address'),
    ({'address': 'node2'}, 'is not an IPv4 address'),
    ({'device': 16}, 'targets[0] (node2/npu0).device=16 is out of range 0-15'),
    ({'device': -1}, 'device=-1 is out of range 0-15'),
])
def test_hccn_ping_targets_that_are_not_npu_addresses_are_refused(monkeypatch, capsys, change, expected):
    target = dict(TARGET, **change)
    node = Node()
    res = run_module(hccn_ping, {'targets': [target]}, node, monkeypatch, capsys)
    assert res['failed'] and expected in res['msg'] and node.calls == []


@pytest.mark.parametrize('args, expected', [
    ({'pkt': 0}, 'pkt=0 is out of range 1-65507'),
    ({'pkt': 70000}, 'pkt=70000 is out of range 1-65507'),
    ({'command_timeout': 0}, 'command_timeout=0 is out of range'),
    ({'busy_retries': -1}, 'busy_retries=-1 is out of range'),
])
def test_hccn_ping_arguments_out_of_range(monkeypatch, capsys, args, expected):
    node = Node()
    res = run_module(hccn_ping, dict(args, targets=[TARGET]), node, monkeypatch, capsys)
    assert res['failed'] and expected in res['msg'] and node.calls == []
