# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugins' report writer: the whole file or the previous one, never half of it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.ascend.kvpool.plugins.action import kvpool_benchmark_report as benchmark_action
from ansible_collections.ascend.kvpool.plugins.action import npu_network_report as npu_network_action
from ansible_collections.ascend.kvpool.plugins.action import vllm_instance_report as vllm_instance_action
from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import (
    ControllerReportAction,
    host_values,
    write_atomic,
    write_json_report,
)
from ansible_collections.ascend.kvpool.tests.unit.plugins.plugin_utils.report_actions import run_report_action
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names


def test_writes_the_file_and_creates_its_directory(tmp_path):
    path = str(tmp_path / 'reports' / 'deep' / 'r.json')
    write_atomic(path, '{"ok": true}\n')
    with open(path) as handle:
        assert handle.read() == '{"ok": true}\n'
    assert os.listdir(os.path.dirname(path)) == ['r.json']        # no temporary file left behind


def test_replaces_an_existing_report_whole(tmp_path):
    path = str(tmp_path / 'r.md')
    write_atomic(path, 'old\n')
    write_atomic(path, 'new\n')
    with open(path) as handle:
        assert handle.read() == 'new\n'


def test_an_unwritable_place_raises_and_keeps_the_old_report(tmp_path):
    path = str(tmp_path / 'r.json')
    write_atomic(path, 'old\n')
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    with pytest.raises(OSError):
        write_atomic(str(blocker / 'r.json'), 'new\n')             # parent is a file
    with open(path) as handle:
        assert handle.read() == 'old\n'


def test_host_values_keeps_the_hosts_that_have_the_variable_as_plain_data():
    class Lazy(object):  # a templated value that is not JSON by itself
        def __str__(self):
            return 'rendered'

    hostvars = {'node1': {'st': [{'port': 8002, 'extra': Lazy()}]}, 'node2': {'other': 1}}
    assert host_values(hostvars, 'st', ['node1', 'node2', 'node3']) == {'node1': [{'port': 8002, 'extra': 'rendered'}]}


def test_host_values_with_keys_reads_only_those_keys_of_each_registered_result_raw():
    class HostVars(dict):  # what the action gets: raw_get skips templating (a module result holds no template)
        def raw_get(self, host):
            return dict.__getitem__(self, host)

        def __getitem__(self, host):
            raise AssertionError('templated access of %s' % host)

        def get(self, host, default=None):
            raise AssertionError('templated access of %s' % host)

    big = {'failed': False, 'ips': {'0': '29.1.1.80'}, 'devices': {'0': {'lldp': 'x' * 50000}},
           'results': [{'ok': True}] * 3}
    hostvars = HostVars(node1={'r': big}, node2={'r': {'skipped': True}}, node3={'other': 1}, node4={'r': 'text'})
    assert host_values(hostvars, 'r', ['node1', 'node2', 'node3', 'node4', 'gone'], ('failed', 'ips', 'results#')) \
        == {'node1': {'failed': False, 'ips': {'0': '29.1.1.80'}, 'results#': 3}, 'node2': {}}
    # A plain mapping (no raw_get) is read as it is.
    assert host_values({'n': {'r': {'msg': 'm'}}}, 'r', ['n'], ('msg', 'failed_pairs')) == {'n': {'msg': 'm'}}


def test_write_json_report_expands_the_path_and_writes_sorted_json(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    path = write_json_report('~/reports/r.json', {'b': 1, 'a': [1]}, 'npu_network_report')
    assert path == str(tmp_path / 'reports' / 'r.json')
    with open(path) as handle:
        assert handle.read() == ('{\n  "a": [\n    1\n  ],\n  "b": 1,\n'
                                 '  "written_by": "ascend.kvpool.npu_network_report"\n}\n')


HOSTVARS = {'node1': {'npu_network_node_result': {'npus': 8}}, 'node2': {'npu_network_node_result': {'npus': 8}}}


def test_report_actions_need_no_connection_and_copy_nothing():
    for cls in (npu_network_action.ActionModule, vllm_instance_action.ActionModule, benchmark_action.ActionModule):
        assert issubclass(cls, ControllerReportAction)
        assert cls._requires_connection is False and cls.TRANSFERS_FILES is False and cls.ARGUMENT_SPEC


def test_report_action_validates_its_arguments_and_writes_the_report(monkeypatch, tmp_path):
    task_vars = {'hostvars': HOSTVARS, 'ansible_play_hosts': ['node1', 'node2'],
                 'ansible_play_hosts_all': ['node1', 'node2']}
    path = tmp_path / 'reports' / 'npu_network.json'
    res = run_report_action(monkeypatch, npu_network_action.ActionModule, {'path': str(path), 'label': 'lab'},
                            task_vars)
    assert res['ok'] and res['path'] == str(path) and json.loads(path.read_text())['npus_checked'] == 16
    with pytest.raises(AnsibleActionFail, match='no_such_option'):
        run_report_action(monkeypatch, npu_network_action.ActionModule, {'no_such_option': 1}, task_vars)


def test_an_unwritable_report_names_the_variable_to_set(monkeypatch, tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    task_vars = {'hostvars': {}, 'ansible_play_hosts_all': []}
    with pytest.raises(AnsibleActionFail) as exc:
        run_report_action(monkeypatch, vllm_instance_action.ActionModule, {'path': str(blocker / 'r.json')}, task_vars)
    assert_names(str(exc.value), 'cannot write the report to', 'set vllm_instance_report_path')


def test_an_unexpected_error_in_a_report_action_names_the_action_and_its_arguments():
    from unittest.mock import MagicMock

    from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import ControllerReportAction

    class Broken(ControllerReportAction):
        ARGUMENT_SPEC = dict(label=dict(type='str', default=''))

        def report(self, result, args, task_vars):
            raise ZeroDivisionError('simulated bug')

    task = MagicMock(args={'label': 'lab'}, action='ascend.kvpool.some_report', async_val=0, check_mode=False,
                     diff=False)
    action = Broken(task, MagicMock(), MagicMock(), MagicMock(), MagicMock(), MagicMock())
    action.validate_argument_spec = lambda argument_spec: (None, {'label': 'lab'})
    res = action.run(task_vars={})
    assert res['failed'] and 'Traceback' in res['exception']
    assert_names(res['msg'], 'ascend.kvpool.some_report', 'failed unexpectedly', 'ZeroDivisionError',
                 "arguments label='lab'")


BAD_HOSTVARS = {'node1': {'npu_network_node_result': {'npus': 8}},
                'node2': {'npu_network_node_result': {'npus': 8, 'errors': [
                    {'check': 'tool', 'message': 'hccn_tool not found', 'raw': ''}]}}}


@pytest.mark.parametrize('fail_on_error', [True, False])
def test_the_report_action_judges_the_report_it_wrote(monkeypatch, tmp_path, fail_on_error):
    """A report that is not ok fails the task with the summary and the path, or warns: no task after it needed."""
    task_vars = {'hostvars': BAD_HOSTVARS, 'ansible_play_hosts': ['node1', 'node2'],
                 'ansible_play_hosts_all': ['node1', 'node2']}
    path = tmp_path / 'npu_network.json'
    res = run_report_action(monkeypatch, npu_network_action.ActionModule,
                            {'path': str(path), 'fail_on_error': fail_on_error}, task_vars)
    assert res['ok'] is False and json.loads(path.read_text())['ok'] is False     # written before judging
    assert [(f['node'], f['check']) for f in res['findings']] == [('node2', 'tool')]
    assert res['coverage'] is None
    if fail_on_error:
        assert res['failed'] is True and 'warnings' not in res
        assert 'hccn_tool not found' in res['msg'] and res['msg'].endswith('report: %s' % path)
        assert res['msg'].splitlines()[:len(res['summary'])] == res['summary']
    else:
        assert not res.get('failed')
        assert len(res['warnings']) == 1, res['warnings']
        assert_names(res['warnings'][0], '1 problem(s)', 'summary', 'fail_on_error is false')


def test_a_good_report_neither_fails_nor_warns(monkeypatch, tmp_path):
    task_vars = {'hostvars': HOSTVARS, 'ansible_play_hosts': ['node1', 'node2'],
                 'ansible_play_hosts_all': ['node1', 'node2']}
    res = run_report_action(monkeypatch, npu_network_action.ActionModule,
                            {'path': str(tmp_path / 'r.json'), 'fail_on_error': True}, task_vars)
    assert res['ok'] and not res.get('failed') and 'warnings' not in res and res['findings'] == []


@pytest.mark.parametrize('plugin_cls, variable', [(npu_network_action.ActionModule, 'npu_network_report_path'),
                                                  (vllm_instance_action.ActionModule, 'vllm_instance_report_path')])
def test_check_mode_writes_no_report_and_says_where_a_run_writes_it(monkeypatch, tmp_path, plugin_cls, variable):
    """--check (ansible_check_mode, also on a task with check_mode: false) writes nothing; the result says where a
    run writes the report; a file there that is not the collection's fails check mode as it fails the run."""
    status = [{'name': 'vllm-8002', 'failed': False, 'healthy': True, 'changed': False}]
    hostvars = dict((h, dict(v, vllm_instance_status=status)) for h, v in HOSTVARS.items())
    task_vars = {'hostvars': hostvars, 'ansible_play_hosts': ['node1', 'node2'],
                 'ansible_play_hosts_all': ['node1', 'node2'], 'ansible_check_mode': True}
    path = tmp_path / 'reports' / 'r.json'
    res = run_report_action(monkeypatch, plugin_cls, {'path': str(path)}, task_vars)
    assert not path.exists() and not (tmp_path / 'reports').exists()
    assert res['path'] == str(path) and res['written'] is False
    assert res['report_line'] == 'check mode: no report written (a run writes %s)' % path
    task_vars['ansible_check_mode'] = False
    res = run_report_action(monkeypatch, plugin_cls, {'path': str(path)}, task_vars)
    assert path.exists() and res['written'] is True and res['report_line'] == 'report: %s' % path
    foreign = tmp_path / 'mine.json'
    foreign.write_text('{"mine": true}')
    task_vars['ansible_check_mode'] = True
    with pytest.raises(AnsibleActionFail) as exc:
        run_report_action(monkeypatch, plugin_cls, {'path': str(foreign)}, task_vars)
    assert_names(str(exc.value), 'not written by ascend.kvpool', variable)
    assert foreign.read_text() == '{"mine": true}'
    # write_in_check_mode (the roles' <role>_report_in_check_mode): the check's own report
    other = tmp_path / 'check' / 'r.json'
    res = run_report_action(monkeypatch, plugin_cls, {'path': str(other), 'write_in_check_mode': True}, task_vars)
    assert other.exists() and res['written'] is True and res['report_line'] == 'report: %s' % other
