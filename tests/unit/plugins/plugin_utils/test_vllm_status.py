# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The instances' status (filter vllm_instance_status) and the play's summary (action vllm_instance_report),
controller-side logic of plugin_utils/vllm_plan.py, from the results vllm_server returns."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

# Where each answers comes from the plan's one rule (instance_where): a wildcard is polled at loopback.
PLAN = {'instances': [
    dict({'name': 'a', 'port': 8002, 'devices_text': '0-3', 'served_model_name': 'qwen', 'host': '0.0.0.0'},
         **vllm_plan.instance_where('0.0.0.0', 8002, '10.0.0.1')),
    dict({'name': 'b', 'port': 8003, 'devices_text': '4-7', 'model': '/models/qwen', 'host': '10.0.0.1'},
         **vllm_plan.instance_where('10.0.0.1', 8003, '10.0.0.1')),
]}


def test_status_merges_launch_and_wait_and_names_the_failure():
    launch = [{'item': {'name': 'a'}, 'action': 'started'}, {'item': {'name': 'b'}, 'action': 'restarted'}]
    wait = [{'item': {'name': 'a'}, 'health': 'healthy', 'ready_seconds': 12.5},
            {'item': {'name': 'b'}, 'failed': True, 'msg': 'vllm-8003 did not become healthy\nlog tail: OOM'}]
    a, b = vllm_plan.vllm_instance_status(PLAN, launch, wait)
    expected = ('http://127.0.0.1:8002', 'healthy', 'started', 12.5)
    assert (a['endpoint'], a['health'], a['action'], a['ready_seconds']) == expected
    assert b['failed'] and b['health'] == 'failed' and b['message'] == 'vllm-8003 did not become healthy'
    assert 'OOM' in b['error'] and b['endpoint'] == 'http://10.0.0.1:8003' and b['served_model_name'] == '/models/qwen'


def test_stopped_instances_are_stopped_as_wanted():
    (a, b) = vllm_plan.vllm_instance_status(PLAN, wanted='stopped')
    assert a['health'] == b['health'] == 'stopped' and a['wanted'] == 'stopped'


def test_summary_counts_problems_and_names_hosts_without_status():
    ok = vllm_plan.vllm_instance_status(PLAN, [], [{'item': {'name': 'a'}, 'health': 'healthy'},
                                                   {'item': {'name': 'b'}, 'health': 'healthy'}])
    bad = vllm_plan.vllm_instance_status(PLAN, [], [{'item': {'name': 'a'}, 'failed': True, 'msg': 'boom'}])
    report = vllm_plan.vllm_instance_summary({'node1': ok, 'node2': bad}, ['node1', 'node2', 'node3'], 'lab')
    assert not report['ok'] and report['instances'] == 4 and report['healthy'] == 2
    assert_names(report['lines'][0], '[lab]', '4 instance(s)', '2 node(s)', '2 healthy', '2 problem(s)')
    assert report['missing_hosts'] == ['node3'] and report['problems'][0]['node'] == 'node2'
    assert any(line.startswith('node3  no status') for line in report['lines'])
    assert vllm_plan.vllm_instance_summary({'node1': ok})['ok']
