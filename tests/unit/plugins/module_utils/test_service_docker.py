# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The engine's container mode: the two module steps around the action plugin's community.docker.docker_container.

The docker CLI is faked at the backend's ``inspect`` / ``run`` (what ``docker inspect`` answers is the shape docker
returns: HostConfig.Binds, Devices, ShmSize, State, RestartCount); docker_container itself and the restart policy
are exercised on the mock cluster (molecule/instances/standalone/test_container.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.module_utils import _service
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.service_fakes import (
    BINDS,
    DEVICES,
    TEMPLATE,
    FakeDocker,
    container_doc,
    docker_now,
    fake_module,
    machine,
    outcome,
)


def spec(**kw):
    args = dict(unit='kvpool-vllm-a', description='vLLM-Ascend instance a (ascend.kvpool)',
                argv=['/usr/local/bin/vllm', 'serve', '/m', '--port', '8002'], env={'PYTHONHASHSEED': '0'},
                devices=[2, 3], stop_timeout=30, port=8002)
    args.update(kw)
    return _service.ServiceSpec(**args)


def step(backend, name, state='started', check=False, healthy=True, wait=True, **spec_kw):
    module, dummy = fake_module(check)
    backend.module = module
    return outcome(machine(module, backend, step=name, wait=wait, ready_timeout=0.5, poll_interval=0.05),
                   spec(**spec_kw), state, dict(changed=False), lambda: [('healthy', lambda: healthy)],
                   explain=lambda log: log.splitlines()[-1])


def test_the_definition_is_the_templates_image_mounts_and_only_the_services_own_npus():
    args, secrets = _service.container_module_args(
        spec(secret_env={'VLLM_API_KEY': 'sk-1'}), FakeDocker(None).template(), 'TEXT')
    assert args['image'] == 'quay.io/ascend/vllm-ascend:v0.22.1rc1' and args['pull'] == 'never'
    assert args['entrypoint'] == ['/usr/local/bin/vllm'] and args['command'] == ['serve', '/m', '--port', '8002']
    assert args['network_mode'] == 'host' and args['init'] is True and args['state'] == 'started'
    assert (args['restart_policy'], args['restart_retries'], args['stop_timeout']) == ('on-failure', 5, 30)
    assert args['shm_size'] == str(1024 ** 3) and args['volumes'] == BINDS and '/etc/hccn.conf:/etc/hccn.conf' in BINDS
    assert args['devices'] == ['%s:%s:rwm' % (d, d) for d in DEVICES[2:]]
    assert args['labels'] == {'ascend.kvpool.spec': 'TEXT', 'ascend.kvpool.managed': '1'}
    # The key is never in the definition: the action plugin fills it in from the no_log option.
    assert args['env'] == {'PYTHONHASHSEED': '0'} and secrets == ['VLLM_API_KEY'] and 'sk-1' not in str(args)
    assert all(args['comparisons'][k] == 'strict' for k in ('devices', 'volumes', 'env', 'labels'))
    master, dummy = _service.container_module_args(spec(devices=[]), FakeDocker(None).template(), 'T')
    assert master['devices'] == ['%s:%s:rwm' % (d, d) for d in DEVICES[4:]]   # control devices only
    # The NPU is the one the container sees (a stand-in host node mapped to /dev/davinci<N> counts as that NPU).
    assert _service.service_devices(['/dev/null:/dev/davinci0:rwm', '/dev/null:/dev/davinci1:rwm'], [1]) == [
        '/dev/null:/dev/davinci1:rwm']


def test_docker_time():
    assert _service.docker_time('0001-01-01T00:00:00Z') is None and _service.docker_time('') is None
    assert _service.docker_time('2026-12-02T02:33:09.5Z') == 1796178789.5
    assert _service.docker_time('2026-12-02T03:33:09+01:00') == 1796178789.0


def test_render_a_new_container_returns_its_definition_and_changes_nothing_itself():
    res = step(FakeDocker(None), 'render', secret_env={'VLLM_API_KEY': 'sk-unit'})
    assert not res['changed'] and res['action'] == 'started' and res['reason'] == 'never started here'
    assert res['container_definition']['name'] == 'kvpool-vllm-a' and res['container_ops'] == []
    assert res['container_secret_env'] == ['VLLM_API_KEY'] and 'sk-unit' not in str(res)
    assert res['diff']['before'] == '' and '"--port"' in res['diff']['after']
    assert res['unit'] == 'kvpool-vllm-a' and res['logs'] == 'docker logs kvpool-vllm-a'


def test_render_the_same_running_container_predicts_no_change_and_restarted_asks_for_a_restart():
    text = _service.container_spec_text(spec(), FakeDocker(None).template())
    be = FakeDocker(None, {'kvpool-vllm-a': container_doc(label=text)})
    res = step(be, 'render')
    assert res['action'] == 'none' and 'diff' not in res and 'restart' not in res['container_definition']
    assert step(be, 'render', state='restarted')['container_definition']['restart'] is True


def test_render_stopped_asks_docker_container_to_remove_it():
    be = FakeDocker(None, {'kvpool-vllm-a': container_doc()})
    res = step(be, 'render', state='stopped')
    assert res['action'] == 'stopped' and 'container_definition' not in res
    assert res['container_ops'] == [{'name': 'kvpool-vllm-a', 'state': 'absent', 'stop_timeout': 30}]
    assert step(FakeDocker(None), 'render', state='stopped')['container_ops'] == []


def test_render_without_the_template_fails_naming_the_role_and_check_mode_says_it_would_start():
    be = FakeDocker(None)
    del be.containers[TEMPLATE]
    res = step(be, 'render')
    assert res['failed']
    assert_names(res['msg'], 'container vllm-ascend', 'not found')
    assert 'ascend.kvpool.vllm_ascend_container' in res['msg']
    checked = step(be, 'render', check=True)
    assert checked['changed'] and checked['action'] == 'started' and checked['health'] == 'unknown'


def test_gate_of_a_healthy_container():
    res = step(FakeDocker(None, {'kvpool-vllm-a': container_doc(started=docker_now(-0.2))}), 'gate')
    assert res['health'] == 'healthy' and res['pid'] == 77 and res['state'] == 'running'
    # Counted from the container's start (docker's StartedAt), as a later wait counts from the launch.
    assert 0.1 < res['ready_seconds'] < 5 and res['container_ops'] == []


def test_gate_of_a_crash_loop_names_the_container_and_shows_the_docker_logs_tail():
    be = FakeDocker(None, {'kvpool-vllm-a': container_doc('exited', exit_code=1, restarts=5)})
    res = step(be, 'gate', healthy=False)
    assert res['failed']
    assert_names(res['msg'], 'vllm instance a', 'container kvpool-vllm-a', 'exited after its start')
    assert_names(res['msg'], 'restarted 5 time(s)', 'Last lines of', 'docker logs kvpool-vllm-a')
    assert_names(res['msg'], 'ValueError', 'Unsupported connector type', 'NoSuchConnector')
    assert res['state'] == 'stopped' and res['container_ops'] == []


def test_gate_of_a_start_that_stays_unhealthy_stops_it_through_docker_container():
    res = step(FakeDocker(None, {'kvpool-vllm-a': container_doc(started=docker_now(-0.1))}), 'gate', healthy=False)
    assert res['failed'] and 'was not healthy' in res['msg']
    assert res['container_ops'] == [{'name': 'kvpool-vllm-a', 'state': 'stopped', 'stop_timeout': 30}]


def test_gate_of_a_long_running_unhealthy_container_asks_for_a_restart():
    be = FakeDocker(None, {'kvpool-vllm-a': container_doc(started=docker_now(-3600))})
    res = step(be, 'gate', healthy=False)
    assert not res.get('failed') and res['container_restart'] and res['action'] == 'restarted'
    assert_names(res['reason'], 'running but not healthy', '(healthy)')


def test_gate_without_wait_polls_once():
    res = step(FakeDocker(None, {'kvpool-vllm-a': container_doc()}), 'gate', healthy=False, wait=False)
    assert res['health'] == 'unknown' and not res.get('failed')


def test_container_mode_without_a_step_refuses():
    res = step(FakeDocker(None), None)
    assert res['failed'] and 'action plugin' in res['msg']
