# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugins of vllm_server and mooncake_master in container mode, with the modules faked.

The three steps (module render -> community.docker.docker_container -> module gate) are checked as calls and as
the task result they make: docker_container's changed and diff are the task's, the key reaches docker_container's
env only and is masked in what it answers, stops and removals the module asks for are docker_container calls. The
node side of the steps is tests/unit/plugins/module_utils/test_service_docker.py; docker_container against a real
engine is molecule/instances/standalone/test_container.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
from ansible.plugins.action import ActionBase

from ansible_collections.ascend.kvpool.plugins.action import mooncake_master as master_action
from ansible_collections.ascend.kvpool.plugins.action import vllm_server as vllm_action
from ansible_collections.ascend.kvpool.plugins.plugin_utils import service_container as sc
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

KEY = 'sk-action-test-key-0123456789'
UNIT = 'kvpool-vllm-a'
DEFINITION = {'name': UNIT, 'image': 'img:1', 'state': 'started', 'env': {'PYTHONHASHSEED': '0'},
              'labels': {'ascend.kvpool.spec': '{}', 'ascend.kvpool.managed': '1'}}
TEXT_DIFF = {'before': '', 'after': '{"command": ["serve"]}\n'}


def rendered(**kw):
    res = {'changed': False, 'action': 'started', 'reason': 'never started here', 'state': 'stopped', 'pid': None,
           'unit': UNIT, 'logs': 'docker logs %s' % UNIT, 'container_ops': [], 'diff': TEXT_DIFF,
           'container_definition': dict(DEFINITION), 'container_secret_env': []}
    res.update(kw)
    return res


def gated(**kw):
    res = {'changed': False, 'health': 'healthy', 'pid': 77, 'state': 'running', 'ready_seconds': 1.5,
           'container_ops': [], 'unit': UNIT}
    res.update(kw)
    return res


class Node(object):
    """The node's answers, in order per module; records every call."""

    def __init__(self, modules, dockers):
        self.modules, self.dockers, self.calls = list(modules), list(dockers), []

    def run_module(self, args):
        self.calls.append(('module', args.get('container_step')))
        return self.modules.pop(0)

    def run_docker(self, args, values):
        self.calls.append(('docker', args, values))
        return self.dockers.pop(0)


def flow(node, check=False, **task_args):
    args = dict(name='a', container='vllm-ascend')
    args.update(task_args)
    return sc.run(node.run_module, node.run_docker, args, {'VLLM_API_KEY': 'api_key'}, check_mode=check)


def test_a_new_container_is_rendered_created_by_docker_container_then_gated():
    docker_diff = {'before': {'exists': False}, 'after': {'exists': True}}
    node = Node([rendered(container_secret_env=['VLLM_API_KEY']), gated()],
                [{'changed': True, 'diff': docker_diff, 'container': {'State': {'Pid': 77}}}])
    res = flow(node, api_key=KEY)
    assert [c[0] if c[0] == 'docker' else c[1] for c in node.calls] == ['render', 'docker', 'gate']
    args, values = node.calls[1][1], node.calls[1][2]
    assert args['env'] == {'PYTHONHASHSEED': '0', 'VLLM_API_KEY': KEY} and values == [KEY]
    assert DEFINITION['env'] == {'PYTHONHASHSEED': '0'}           # the module's definition is not changed
    assert res['changed'] and res['action'] == 'started' and res['health'] == 'healthy' and res['pid'] == 77
    assert res['diff'] == [TEXT_DIFF, docker_diff]               # the definition's diff, then docker_container's
    assert not any(k.startswith('container_') for k in res)


def test_an_unchanged_container_is_only_gated():
    node = Node([rendered(action='none', reason='running with the same settings', state='running', diff=None),
                 gated()], [{'changed': False}])
    res = flow(node)
    assert not res['changed'] and res['action'] == 'none' and res['health'] == 'healthy' and 'diff' not in res


def test_docker_container_decides_a_recreate_the_definition_did_not_predict():
    node = Node([rendered(action='none', state='running', diff=None), gated()],
                [{'changed': True, 'diff': {'before': {'image': 'sha256:a'}, 'after': {'image': 'sha256:b'}}}])
    res = flow(node)
    assert res['changed'] and res['action'] == 'restarted' and 'community.docker.docker_container' in res['reason']
    assert res['diff'] == {'before': {'image': 'sha256:a'}, 'after': {'image': 'sha256:b'}}


def test_check_mode_reports_docker_containers_answer_and_does_not_gate_a_pending_change():
    node = Node([rendered()], [{'changed': True}])
    res = flow(node, check=True)
    assert res['changed'] and res['health'] == 'unknown' and [c[0] for c in node.calls] == ['module', 'docker']


def test_launch_without_wait_returns_after_docker_container_started_it():
    node = Node([rendered()], [{'changed': True, 'container': {'State': {'Pid': 4321}}}])
    res = flow(node, wait=False)
    assert res['health'] == 'starting' and res['state'] == 'running' and res['pid'] == 4321
    assert len(node.calls) == 2


def test_a_long_unhealthy_container_is_restarted_by_docker_container_and_gated_again():
    node = Node([rendered(action='none', state='running', diff=None),
                 gated(health='unknown', container_restart=True, action='restarted', changed=True,
                       reason='running but not healthy (GET /health -> 200)'), gated()],
                [{'changed': False}, {'changed': True}])
    res = flow(node)
    assert node.calls[2][0] == 'module' and node.calls[3][1]['restart'] is True
    assert res['changed'] and res['action'] == 'restarted' and res['health'] == 'healthy'
    assert res['reason'] == 'running but not healthy (GET /health -> 200)'


def test_a_failed_start_keeps_the_logs_tail_and_stops_the_container_through_docker_container():
    stop = {'name': UNIT, 'state': 'stopped', 'stop_timeout': 30}
    node = Node([rendered(), gated(failed=True, msg='vllm instance a (container %s) was not healthy ...' % UNIT,
                                   health='unhealthy', state='stopped', log_tail='boom', reason='failed start',
                                   container_ops=[stop])],
                [{'changed': True}, {'changed': True}])
    res = flow(node)
    assert node.calls[-1] == ('docker', stop, [])
    assert res['failed'] and 'container %s' % UNIT in res['msg'] and res['log_tail'] == 'boom'
    assert res['reason'] == 'failed start' and res['state'] == 'stopped'


def test_stopped_and_unlisted_are_docker_container_removals():
    ops = [{'name': 'kvpool-vllm-old', 'state': 'absent', 'stop_timeout': 60},
           {'name': UNIT, 'state': 'absent', 'stop_timeout': 60}]
    node = Node([rendered(action='stopped', state='running', container_definition=None, container_ops=ops,
                          stopped_unlisted=['old'], diff={'before': 'x', 'after': ''})],
                [{'changed': True}, {'changed': True}])
    res = flow(node, state='stopped')
    assert [c[1]['name'] for c in node.calls[1:]] == ['kvpool-vllm-old', UNIT]
    assert res['changed'] and res['action'] == 'stopped' and res['state'] == 'stopped' and res['pid'] is None
    assert res['stopped_unlisted'] == ['old'] and res['diff'] == {'before': 'x', 'after': ''}


def test_a_failing_docker_container_fails_the_task_naming_it():
    node = Node([rendered()], [{'failed': True, 'msg': 'Error creating container: no space left'}])
    res = flow(node)
    assert res['failed']
    assert_names(res['msg'], 'community.docker.docker_container', 'create or start', 'container %s' % UNIT,
                 'Error creating container')
    assert len(node.calls) == 2


def test_a_failed_render_still_runs_the_removals_it_asked_for():
    ops = [{'name': 'kvpool-vllm-old', 'state': 'absent', 'stop_timeout': 60}]
    node = Node([{'failed': True, 'msg': 'could not stop vllm instance x', 'container_ops': ops}], [{'changed': True}])
    res = flow(node)
    assert res['failed'] and res['changed'] and node.calls[1][1] == ops[0] and 'container_ops' not in res


def test_a_failed_removal_of_the_service_container_is_no_stop():
    """Container mode's stop (issue 32 audit): docker_container state=absent that fails leaves the task failed naming
    the container, with the state as the module read it (running), never "stopped"."""
    ops = [{'name': UNIT, 'state': 'absent', 'stop_timeout': 60}]
    node = Node([rendered(action='stopped', state='running', pid=77, container_definition=None, container_ops=ops)],
                [{'failed': True, 'msg': 'Error response from daemon: cannot stop container: permission denied'}])
    res = flow(node, state='stopped')
    assert res['failed'] and not res.get('changed')
    assert_names(res['msg'], 'community.docker.docker_container', 'remove container %s' % UNIT, 'permission denied')
    assert res['state'] == 'running' and res['pid'] == 77 and len(node.calls) == 2


# --- the action plugin itself, _execute_module faked --------------------------------------------------------------

class Task(object):
    def __init__(self, args, check_mode=False):
        self.args, self.check_mode = args, check_mode


def action(cls, monkeypatch, args, answers, check_mode=False):
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(ActionBase, '_update_module_args',
                        lambda self, name, margs, task_vars, *a, **kw: margs.update(_ansible_no_log=False))
    plugin = cls.ActionModule.__new__(cls.ActionModule)
    plugin._task = Task(args, check_mode)
    plugin._no_log_call = False
    calls = []

    def execute(module_name=None, module_args=None, task_vars=None):
        sent = dict(module_args)
        plugin._update_module_args(module_name, sent, task_vars)
        calls.append((module_name, sent))
        return json.loads(json.dumps(answers.pop(0)))
    plugin._execute_module = execute
    return plugin.run(task_vars={}), calls


def test_host_mode_is_one_call_of_the_module(monkeypatch):
    res, calls = action(master_action, monkeypatch, {'port': 50088}, [{'changed': False, 'action': 'none'}])
    assert calls == [('ascend.kvpool.mooncake_master', {'port': 50088, '_ansible_no_log': False})]
    assert res == {'changed': False, 'action': 'none'}


def test_the_key_goes_to_docker_container_under_no_log_and_is_masked_in_its_answer(monkeypatch):
    leaked = {'changed': True, 'invocation': {'module_args': {'env': {'VLLM_API_KEY': KEY}}},
              'diff': {'before': {}, 'after': {'env': ['VLLM_API_KEY=%s' % KEY]}},
              'container': {'State': {'Pid': 5}, 'Config': {'Env': ['VLLM_API_KEY=%s' % KEY]}}}
    args = {'name': 'a', 'container': 'vllm-ascend', 'api_key': KEY, 'wait': True}
    res, calls = action(vllm_action, monkeypatch, args,
                        [rendered(container_secret_env=['VLLM_API_KEY']), leaked, gated()])
    assert [c[0] for c in calls] == ['ascend.kvpool.vllm_server', 'community.docker.docker_container',
                                     'ascend.kvpool.vllm_server']
    assert calls[0][1]['container_step'] == 'render' and calls[2][1]['container_step'] == 'gate'
    docker = calls[1][1]
    assert docker['env']['VLLM_API_KEY'] == KEY and docker['_ansible_no_log'] is True
    assert calls[0][1]['_ansible_no_log'] is False and calls[2][1]['_ansible_no_log'] is False
    assert KEY not in json.dumps(res) and res['changed'] and res['health'] == 'healthy'
    assert 'VLLM_API_KEY=********' in json.dumps(res['diff'])


def test_container_mode_of_the_master(monkeypatch):
    args = {'container': 'vllm-ascend', 'port': 50088}
    res, calls = action(master_action, monkeypatch, args,
                        [rendered(unit='kvpool-mooncake-master'), {'changed': False}, gated()])
    assert calls[1][0] == 'community.docker.docker_container' and calls[1][1]['_ansible_no_log'] is False
    assert res['health'] == 'healthy'


@pytest.mark.parametrize('names, task_args, env', [
    (['VLLM_API_KEY'], {'api_key': KEY}, {'A': '1', 'VLLM_API_KEY': KEY}),
    (['VLLM_API_KEY'], {}, {'A': '1'}),
    ([], {'api_key': KEY}, {'A': '1'}),
])
def test_docker_args_fill_only_the_secrets_the_module_names(names, task_args, env):
    args, values = sc.docker_args({'env': {'A': '1'}}, names, {'VLLM_API_KEY': 'api_key'}, task_args)
    assert args['env'] == env and values == ([KEY] if len(env) == 2 else [])


def test_a_secret_named_variable_of_the_tasks_env_is_filled_from_there_and_masked():
    """The module leaves HF_TOKEN of its env out of the container definition (secret_env names it); the action
    fills it from the task's env, and its value is among those masked in docker_container's answer."""
    task = {'api_key': KEY, 'env': {'HF_TOKEN': 'hf-token-value', 'A': '1'}}
    args, values = sc.docker_args({'env': {'A': '1'}}, ['HF_TOKEN', 'VLLM_API_KEY'], {'VLLM_API_KEY': 'api_key'}, task)
    assert args['env'] == {'A': '1', 'HF_TOKEN': 'hf-token-value', 'VLLM_API_KEY': KEY}
    assert sorted(values) == sorted(['hf-token-value', KEY])


def test_docker_containers_empty_diff_of_an_unchanged_container_is_not_shown():
    node = Node([rendered(action='none', state='running', diff=None), gated()],
                [{'changed': False, 'diff': {'before': {}, 'after': {}}}])
    assert 'diff' not in flow(node)


def test_a_failing_stop_after_a_failed_start_is_a_warning_and_the_start_stays_the_message():
    stop = {'name': UNIT, 'state': 'stopped', 'stop_timeout': 30}
    node = Node([rendered(), gated(failed=True, msg='was not healthy', container_ops=[stop])],
                [{'changed': True}, {'failed': True, 'msg': 'daemon gone'}])
    res = flow(node)
    assert res['failed'] and res['msg'] == 'was not healthy'
    assert len(res['warnings']) == 1, res['warnings']
    assert_names(res['warnings'][0], 'community.docker.docker_container', 'could not stop', 'container %s' % UNIT,
                 'daemon gone')
