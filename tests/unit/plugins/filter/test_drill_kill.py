# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A signal to the wrong process (issue 32): the failover drill's kill of the leader's master container
(playbooks/drill_master_failover.yml) takes its pid from filter master_kill_target, which refuses a container that
is not running (docker's State.Pid 0: ``kill -KILL 0`` killed Ansible's own worker), a pid of 1 or less, an answer
about another container and a pid whose cgroup does not name the container. docker cannot run here: the answers are
SIMULATED, in the shape of ``docker inspect`` (Docker 24). In host mode the same filter (``systemd=true``) reads
``systemctl show`` of the master's unit and refuses a unit that is not loaded, not active or has no main process
(MainPID 0), naming the host, the unit and the fix; those answers are SIMULATED too, in the shape systemd 252 prints
them (the service's properties first). The one other signal of the node-side code, the parallel runner's kill of a
command that timed out, never signals pid 0 or 1 or a process already reaped."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.filter.etcd import master_kill_target
from ansible_collections.ascend.kvpool.plugins.module_utils import _runner
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

NAME = 'kvpool-mooncake-master'
CID = '4f1e' * 16
PLAYBOOK = Path(__file__).resolve().parents[4] / 'playbooks' / 'drill_master_failover.yml'


def inspected(running=True, pid=4321, status=None, name=NAME, rc=0, **state):
    """A registered ``docker inspect NAME`` result (rc, stdout, stderr) of a container in the given state."""
    doc = {'Id': CID, 'Name': '/' + name, 'State': dict({
        'Status': status or ('running' if running else 'exited'), 'Running': running, 'Paused': False,
        'Restarting': False, 'OOMKilled': False, 'Dead': False, 'Pid': pid, 'ExitCode': 0 if running else 137,
        'StartedAt': '2026-12-05T17:00:00.1Z', 'FinishedAt': '0001-01-01T00:00:00Z'}, **state)}
    return {'rc': rc, 'stdout': json.dumps([doc]), 'stderr': '', 'changed': False}


CGROUP = '0::/system.slice/docker-%s.scope\n' % CID


def test_a_container_that_is_not_running_is_never_signalled():
    # What Docker reports for a stopped container: Running false, Pid 0. kill -KILL 0 is the session's own group.
    with pytest.raises(AnsibleFilterError) as err:
        master_kill_target(inspected(running=False, pid=0), NAME)
    assert_names(str(err.value), NAME, 'exited', 'State.Pid 0', 'nothing was killed', 'site.yml')


@pytest.mark.parametrize('state', [dict(running=True, status='paused', Paused=True),
                                   dict(running=True, status='restarting', Restarting=True),
                                   dict(running=False, pid=4321, status='created')])
def test_a_paused_restarting_or_created_container_is_never_signalled(state):
    with pytest.raises(AnsibleFilterError) as err:
        master_kill_target(inspected(**state), NAME)
    assert_names(str(err.value), NAME, state['status'], 'nothing was killed')


@pytest.mark.parametrize('pid', [0, 1, -1, True, '4321', None, 2.5])
def test_a_pid_of_one_or_less_or_not_a_number_is_never_signalled(pid):
    with pytest.raises(AnsibleFilterError) as err:
        master_kill_target(inspected(pid=pid), NAME)
    assert_names(str(err.value), NAME, repr(pid), 'nothing was killed')


@pytest.mark.parametrize('result, names', [
    ({'rc': 1, 'stdout': '[]', 'stderr': 'Error: No such object: %s' % NAME}, ['rc 1', 'No such object']),
    ({'skipped': True}, ['did not run']),
    ({'rc': 0, 'stdout': 'garbage'}, ['printed no JSON']),
    ({'rc': 0, 'stdout': '[]'}, ['did not describe one container']),
    (inspected(name='other'), ["'other'", 'not %s' % NAME]),
])
def test_a_failed_or_foreign_inspect_is_never_signalled(result, names):
    with pytest.raises(AnsibleFilterError) as err:
        master_kill_target(result, NAME)
    assert_names(str(err.value), NAME, 'nothing was killed', *names)


def test_the_running_containers_process_is_the_target_once_its_cgroup_names_the_container():
    assert master_kill_target(inspected(), NAME) == {'pid': 4321, 'id': CID}
    assert master_kill_target(inspected(), NAME, cgroup={'rc': 0, 'stdout': CGROUP}) == {'pid': 4321, 'id': CID}
    v1 = '12:pids:/docker/%s\n11:memory:/docker/%s\n' % (CID, CID)  # cgroup v1, the cgroupfs driver
    assert master_kill_target(inspected(), NAME, cgroup=v1)['pid'] == 4321


@pytest.mark.parametrize('cgroup, names', [
    ({'rc': 0, 'stdout': '0::/user.slice/user-0.slice/session-3.scope\n'}, ['is not a process of', 'ended']),
    ({'rc': 1, 'stdout': '', 'stderr': 'cat: /proc/4321/cgroup: No such file or directory'}, ['is gone']),
])
def test_a_pid_that_is_no_longer_the_containers_is_never_signalled(cgroup, names):
    with pytest.raises(AnsibleFilterError) as err:
        master_kill_target(inspected(), NAME, cgroup=cgroup)
    assert_names(str(err.value), 'pid 4321', NAME, 'nothing was killed', 'run the drill again', *names)


LEAF = st.none() | st.booleans() | st.integers(min_value=-5, max_value=10 ** 6) | st.floats() | st.text(max_size=8)
STATE = st.fixed_dictionaries({}, optional=dict(
    (k, LEAF) for k in ('Running', 'Pid', 'Paused', 'Restarting', 'Status')))
DOC = st.fixed_dictionaries({'Name': st.sampled_from(['/' + NAME, NAME, '/other']) | LEAF,
                             'Id': st.just(CID) | LEAF, 'State': STATE | LEAF})


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.lists(DOC, min_size=1, max_size=2), DOC, LEAF), st.none() | st.just(CGROUP) | st.text(max_size=20))
def test_whatever_docker_prints_the_target_is_a_running_pid_above_1_or_an_error(doc, cgroup):
    try:
        target = master_kill_target({'rc': 0, 'stdout': json.dumps(doc)}, NAME, cgroup=cgroup)
    except AnsibleFilterError:
        return
    state = doc[0]['State']
    assert isinstance(target['pid'], int) and not isinstance(target['pid'], bool) and target['pid'] > 1
    assert state['Running'] is True and state['Pid'] == target['pid'] and target['id'] == CID
    assert cgroup is None or CID in cgroup


def test_the_drill_signals_only_the_checked_pid_of_the_container():
    plays = yaml.safe_load(PLAYBOOK.read_text())
    tasks = [t for play in plays for t in play.get('tasks') or []]
    kill = [t for t in tasks if t['name'].startswith('Kill the leader')]
    assert len(kill) == 1
    container = kill[0]['vars']['kvpool_drill__container']
    text = PLAYBOOK.read_text()
    assert '.State.Pid' not in text and 'docker inspect --format' not in text  # no pid taken unchecked
    assert 'master_kill_target' in kill[0]['vars']['kvpool_drill__target']
    assert 'cgroup=kvpool_drill__cgroup' in kill[0]['vars']['kvpool_drill__target']
    # the cgroup is checked once more by the command that signals, and the pid is the filter's
    assert container[:2] == ['sh', '-c'] and 'grep -qF' in container[2] and 'kill -KILL "$2"' in container[2]
    assert container[4:] == ['{{ kvpool_drill__target.id }}', '{{ kvpool_drill__target.pid }}']
    assert kill[0]['vars']['kvpool_drill__unit'][4] == 'kvpool-mooncake-master'


# --- host mode: the master's systemd unit ---------------------------------------------------------------------------
def shown(load='loaded', active='active', sub='running', pid=1187, rc=0, stderr=''):
    """A registered ``systemctl show -p LoadState,ActiveState,SubState,MainPID kvpool-mooncake-master``."""
    out = '' if rc else 'MainPID=%s\nLoadState=%s\nActiveState=%s\nSubState=%s\n' % (pid, load, active, sub)
    return {'rc': rc, 'stdout': out, 'stderr': stderr, 'changed': False}


def unit_target(show, **kw):
    return master_kill_target(show, NAME, systemd=True, host='node1', **kw)


def test_a_running_master_unit_is_the_target_with_its_main_pid():
    assert unit_target(shown()) == {'pid': 1187, 'unit': NAME}
    assert unit_target(shown()['stdout']) == {'pid': 1187, 'unit': NAME}  # the text alone


@pytest.mark.parametrize('show, names', [
    # stopped by hand (systemctl stop): systemd's MainPID=0
    (shown(active='inactive', sub='dead', pid=0), ['is inactive (dead) with MainPID 0']),
    # the restart limit hit
    (shown(active='failed', sub='failed', pid=0), ['is failed (failed) with MainPID 0']),
    # between two starts (Restart=on-failure, RestartSec)
    (shown(active='activating', sub='auto-restart', pid=0), ['is activating (auto-restart)']),
    (shown(active='deactivating', sub='stop-sigterm', pid=1187), ['is deactivating (stop-sigterm)']),
])
def test_a_master_unit_that_does_not_run_is_never_killed(show, names):
    with pytest.raises(AnsibleFilterError) as err:
        unit_target(show)
    assert_names(str(err.value), 'node1: ', 'unit %s' % NAME, 'nothing was killed', 'kills nothing',
                 'Fix: start it (site.yml --tags master)', *names)


@pytest.mark.parametrize('load', ['not-found', 'masked', 'error'])
def test_a_master_unit_that_is_not_loaded_is_never_killed(load):
    with pytest.raises(AnsibleFilterError) as err:
        unit_target(shown(load=load, active='inactive', sub='dead', pid=0))
    assert_names(str(err.value), 'node1: ', 'unit %s is %s (LoadState)' % (NAME, load), 'nothing was killed',
                 'does not run as a systemd unit on node1', 'Fix', 'site.yml --tags master', 'kvpool_site_container')


@pytest.mark.parametrize('pid', ['0', '1', '-5', 'x'])
def test_an_active_unit_without_a_main_process_is_never_killed(pid):
    """Active with MainPID 0 (a oneshot unit that remains after exit, a unit of that name someone else wrote)."""
    with pytest.raises(AnsibleFilterError) as err:
        unit_target(shown(pid=pid))
    assert_names(str(err.value), 'node1: ', 'unit %s is active (running)' % NAME, 'MainPID is %r' % pid,
                 'nothing was killed', 'Fix', 'systemctl status %s' % NAME)


@pytest.mark.parametrize('show, names', [
    (shown(rc=1, stderr='Failed to connect to bus: No such file or directory'),
     ['systemctl show %s failed (rc 1' % NAME, 'Failed to connect to bus', 'whether the master runs is unknown']),
    ({'skipped': True}, ['did not run (skipped)']),
    ({'rc': 0, 'stdout': '<html>proxy</html>'}, ['printed no LoadState, ActiveState, MainPID']),
    ({'rc': 0, 'stdout': 'LoadState=loaded\nActiveState=active\n'}, ['printed no MainPID']),
])
def test_a_failed_or_empty_read_of_the_unit_is_never_a_kill(show, names):
    with pytest.raises(AnsibleFilterError) as err:
        unit_target(show)
    assert_names(str(err.value), 'node1: ', 'nothing was killed', 'Fix', 'on node1', *names)


def test_the_host_starts_the_message_in_container_mode_too_and_cgroup_is_container_mode_only():
    with pytest.raises(AnsibleFilterError) as err:
        master_kill_target(inspected(running=False, pid=0), NAME, host='node2')
    assert_names(str(err.value), 'master_kill_target: node2: container %s is exited' % NAME)
    with pytest.raises(AnsibleFilterError) as err:
        unit_target(shown(), cgroup=CGROUP)
    assert_names(str(err.value), 'cgroup is for container mode')


SHOW_VALUE = st.sampled_from(['loaded', 'not-found', 'masked', 'active', 'inactive', 'failed', 'activating',
                              'running', 'dead', '0', '1', '1187', '']) | st.text(
    st.characters(blacklist_categories=('Cc', 'Zl', 'Zp')), max_size=6)  # one line each, as systemd prints them


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(['LoadState', 'ActiveState', 'SubState', 'MainPID', 'Other']), SHOW_VALUE),
       st.sampled_from([0, 1]))
def test_whatever_systemctl_show_prints_the_unit_target_is_a_running_main_pid_or_an_error(props, rc):
    text = ''.join('%s=%s\n' % kv for kv in props.items())
    try:
        target = unit_target({'rc': rc, 'stdout': text, 'stderr': 'err'})
    except AnsibleFilterError as exc:
        assert 'nothing was killed' in str(exc) and 'node1' in str(exc)
        return
    assert rc == 0 and props['LoadState'].strip() == 'loaded' and props['ActiveState'].strip() == 'active'
    assert target['pid'] > 1 and target['pid'] == int(props['MainPID']) and target['unit'] == NAME


def test_the_drill_reads_the_unit_first_and_kills_only_its_checked_main_pid():
    plays = yaml.safe_load(PLAYBOOK.read_text())
    tasks = [t for play in plays for t in play.get('tasks') or []]
    names = [t['name'] for t in tasks]
    show = tasks[names.index("Read the leader's master unit (host mode)")]
    refuse = tasks[names.index('Refuse a master unit that does not run (host mode)')]
    kill = tasks[names.index("Kill the leader's mooncake_master process (systemd or the container's restart policy "
                             "starts it again)")]
    assert names.index(show['name']) < names.index(refuse['name']) < names.index(kill['name'])
    argv = show['ansible.builtin.command']['argv']
    assert argv[:2] == ['systemctl', 'show'] and argv[-1] == NAME
    assert set(argv[argv.index('-p') + 1].split(',')) >= {'LoadState', 'ActiveState', 'MainPID'}
    assert show['changed_when'] is False and show['check_mode'] is False and show['register'] == 'kvpool_drill__show'
    assert "kvpool_site_container | length == 0" in show['when'] and show['when'] == refuse['when']
    target = refuse['ansible.builtin.set_fact']['kvpool_drill_unit_target']
    assert 'kvpool_drill__show | ascend.kvpool.master_kill_target' in target
    assert 'systemd=true' in target and 'host=inventory_hostname' in target
    unit = kill['vars']['kvpool_drill__unit']
    # MainPID read again right before systemctl kill, which runs only when it is still the checked pid
    assert unit[:2] == ['sh', '-c'] and 'systemctl show -p MainPID --value "$1"' in unit[2]
    assert '[ "$p" = "$2" ] && { systemctl kill -s KILL "$1"; exit $?; }' in unit[2] and 'exit 1' in unit[2]
    assert unit[4:] == [NAME, '{{ kvpool_drill_unit_target.pid }}', '{{ inventory_hostname }}']
    assert kill['failed_when'] == 'kvpool_drill__kill.rc != 0' and kill['register'] == 'kvpool_drill__kill'


@pytest.mark.parametrize('main_pid, expect_kill', [('1187', True), ('0', False), ('2201', False)])
def test_the_drills_kill_command_signals_only_when_main_pid_is_unchanged(tmp_path, main_pid, expect_kill):
    """The host-mode command of the kill task run by sh over a stub systemctl (answers MainPID, logs a kill)."""
    plays = yaml.safe_load(PLAYBOOK.read_text())
    kill = [t for play in plays for t in play.get('tasks') or [] if t['name'].startswith('Kill the leader')][0]
    unit = kill['vars']['kvpool_drill__unit']
    stub = tmp_path / 'systemctl'
    stub.write_text('#!/bin/sh\ncase "$1" in show) echo %s;; kill) echo "$*" >> "%s/killed";; esac\n'
                    % (main_pid, tmp_path))
    stub.chmod(0o755)
    argv = unit[:4] + [NAME, '1187', 'node1']
    env = dict(os.environ, PATH='%s:%s' % (tmp_path, os.environ.get('PATH', '')))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    killed = tmp_path / 'killed'
    if expect_kill:
        assert done.returncode == 0 and killed.read_text() == 'kill -s KILL %s\n' % NAME
    else:
        assert done.returncode == 1 and not killed.exists()
        assert_names(done.stderr, 'node1: unit %s has MainPID %s now, not 1187' % (NAME, main_pid),
                     'nothing was killed', 'run the drill again')


class _Proc(object):
    def __init__(self, pid, returncode=None):
        self.pid = pid
        self.returncode = returncode
        self.killed = False

    def kill(self):
        self.killed = True


@pytest.mark.parametrize('pid, returncode', [(0, None), (1, None), (-1, None), (4321, 0), (4321, -9)])
def test_the_runner_never_signals_pid_0_or_1_or_a_reaped_process(monkeypatch, pid, returncode):
    sent = []
    monkeypatch.setattr(_runner.os, 'killpg', lambda group, sig: sent.append((group, sig)))
    proc = _Proc(pid, returncode)
    _runner.kill_group(proc)
    assert sent == [] and not proc.killed


def test_the_runner_kills_the_group_of_its_own_running_command(monkeypatch):
    sent = []
    monkeypatch.setattr(_runner.os, 'killpg', lambda group, sig: sent.append((group, sig)))
    proc = _Proc(4321)
    _runner.kill_group(proc)
    assert sent == [(4321, signal.SIGKILL)] and proc.killed


# --- the instances' restarts before and after: never "kept serving" from nothing read -----------------------------
DOCKER_STUB = '''#!/bin/sh
case "$1" in
  ps) [ -n "$PS_FAILS" ] && { echo "Cannot connect to the Docker daemon" >&2; exit 1; }
      printf 'kvpool-mooncake-master\\nkvpool-vllm-qwen-a\\n' ;;
  inspect) [ -n "$INSPECT_FAILS" ] && { echo "Error: No such object: $4" >&2; exit 1; }
      echo "2 2026-12-05T20:00:00.1Z" ;;
esac
'''


@pytest.mark.parametrize('fault, rc, names', [
    ('', 0, ['kvpool-vllm-qwen-a 2 2026-12-05T20:00:00.1Z']),
    ('PS_FAILS', 1, ['docker ps failed', 'check the docker daemon']),
    ('INSPECT_FAILS', 1, ['docker inspect kvpool-vllm-qwen-a failed', 'check the docker daemon']),
])
def test_the_drills_container_read_fails_on_a_failed_docker_answer(tmp_path, fault, rc, names):
    """Container mode: the drill reads each instance container's restart count and start time (SIMULATED docker
    answers); a failed docker read fails the task, never an empty list that reads as 'kept serving'."""
    script = yaml.safe_load(PLAYBOOK.read_text())[0]['vars']['kvpool_drill_containers_script']
    assert '{{' not in script  # docker's Go templates are split by shell quotes, never read by Ansible
    stub = tmp_path / 'docker'
    stub.write_text(DOCKER_STUB)
    stub.chmod(0o755)
    env = dict(os.environ, PATH='%s:%s' % (tmp_path, os.environ.get('PATH', '')))
    if fault:
        env[fault] = '1'
    done = subprocess.run(['sh', '-c', script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == rc, done
    assert_names(done.stdout if rc == 0 else done.stderr, *names)
    assert 'kvpool-mooncake-master' not in done.stdout  # only the instances


def test_the_drill_says_not_checked_when_no_instance_was_read():
    """The report line: the same lines before and after are 'kept serving' only when there were lines at all."""
    text = PLAYBOOK.read_text()
    assert "'not checked: no instance of the collection found on this host'" in text
    assert text.index('if not kvpool_drill_restarts_before.stdout_lines') < text.index("'kept serving, not restarted'")
