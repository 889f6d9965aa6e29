# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lifecycle engine's pure parts: the unit file, systemctl's answers, the decision.

The engine's effects (systemctl, the journal, restarts by systemd, docker) are exercised on the mock cluster, whose
nodes run systemd as PID 1 (molecule scenarios mooncake and instances).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _service
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.service_fakes import (
    SHOW_AUTO_RESTART,
    SHOW_CRASH_LOOP_OVER,
    SHOW_MISSING,
    SHOW_RUNNING,
    FakeManager,
    Recorder,
    ensure,
    fake_module,
    machine,
    outcome,
    spec,
)


def exec_words(unit_text):
    """ExecStart= of a unit file back to its argv (systemd's quoting: the shell's double quotes, %% and $$)."""
    lines = unit_text.splitlines()
    start = [i for i, line in enumerate(lines) if line.startswith('ExecStart=')][0]
    text = lines[start][len('ExecStart='):]
    while text.endswith('\\'):
        start += 1
        text = text[:-1] + ' ' + lines[start].strip()
    return [w.replace('%%', '%').replace('$$', '$') for w in shlex.split(text)]


def test_unit_has_the_restart_policy_order_journal_and_no_secret():
    text = _service.render_unit(spec(secret_env={'VLLM_API_KEY': 'sk-very-secret'}))
    for line in ('Restart=on-failure', 'StartLimitIntervalSec=60', 'StartLimitBurst=5', 'WantedBy=multi-user.target',
                 'After=network-online.target kvpool-mooncake-master.service', 'Wants=network-online.target',
                 'KillMode=control-group', 'StandardOutput=journal', 'StandardError=journal',
                 'EnvironmentFile=/etc/ascend-kvpool/secrets/kvpool-vllm-a.env'):
        assert line in text.splitlines(), line
    assert 'sk-very-secret' not in text
    assert _service.render_secret_env({'VLLM_API_KEY': 'sk-very-secret'}) == 'VLLM_API_KEY=sk-very-secret\n'


def test_exec_start_round_trips_quotes_percent_and_dollar():
    s = spec(argv=['/bin/sh', '-c', 'v=$1; echo "%s"', '--kv-transfer-config', '{"a": 1}'])
    assert exec_words(_service.render_unit(s)) == s.argv
    assert 'Environment="ODD=a \\"q\\" 100%% $HOME"' in _service.render_unit(s)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=('Cs', 'Cc')), min_size=1, max_size=20),
                min_size=1, max_size=6))
def test_exec_start_round_trips_any_argv(words):
    s = spec(argv=['/bin/x'] + words)
    assert exec_words(_service.render_unit(s)) == s.argv


def test_bad_unit_names_are_refused():
    with pytest.raises(_service.ServiceError):
        spec(unit='a b/../c')


@pytest.mark.parametrize('text,state,alive,restarts', [
    (SHOW_RUNNING, 'active', True, 1),
    (SHOW_AUTO_RESTART, 'restarting', True, 1),
    (SHOW_CRASH_LOOP_OVER, 'failed', False, 5),
    (SHOW_MISSING, 'inactive', False, 0),
])
def test_status_from_systemctl_show(text, state, alive, restarts):
    status = _service.status_from_show(_service.parse_show(text))
    assert status['state'] == state and (status['state'] in _service.ALIVE_STATES) == alive
    assert status['restarts'] == restarts
    assert status['exists'] == (text is not SHOW_MISSING)


def test_status_of_a_crash_loop_names_the_start_limit():
    status = _service.status_from_show(_service.parse_show(SHOW_CRASH_LOOP_OVER))
    action, reason = _service.decide('started', True, status)
    assert action == 'started'
    assert_names(reason, 'failed', 'start-limit-hit', '5 restart(s)')


RUNNING = _service.status_from_show(_service.parse_show(SHOW_RUNNING))
MISSING = _service.status_from_show(_service.parse_show(SHOW_MISSING))
FAILED = _service.status_from_show(_service.parse_show(SHOW_CRASH_LOOP_OVER))
RESTARTING = _service.status_from_show(_service.parse_show(SHOW_AUTO_RESTART))


@pytest.mark.parametrize('state,same,status,action', [
    ('started', False, MISSING, 'started'),       # new
    ('started', False, RUNNING, 'restarted'),     # changed setting
    ('started', True, RUNNING, 'wait'),           # same: only the health gate decides
    ('started', True, RESTARTING, 'wait'),        # systemd brings it back by itself
    ('started', True, FAILED, 'started'),         # dead (gave up restarting)
    ('restarted', True, RUNNING, 'restarted'),
    ('restarted', True, FAILED, 'started'),
    ('stopped', True, RUNNING, 'stopped'),        # removed from the list
    ('stopped', True, FAILED, 'stopped'),         # the unit file goes too
    ('stopped', True, MISSING, 'none'),
])
def test_decide(state, same, status, action):
    assert _service.decide(state, same, status)[0] == action


def test_a_service_container_gets_only_its_own_npus():
    devices = ['/dev/davinci%d:/dev/davinci%d:rwm' % (i, i) for i in range(4)] + [
        '/dev/davinci_manager:/dev/davinci_manager:rwm', '/dev/hisi_hdc:/dev/hisi_hdc:rwm']
    assert _service.service_devices(devices, [2, 3]) == devices[2:]
    assert _service.service_devices(devices, []) == devices[4:]          # the master: control devices only
    assert _service.service_devices(devices, None) == devices


def test_container_status():
    assert _service.status_from_inspect(None)['exists'] is False
    doc = {'State': {'Status': 'exited', 'ExitCode': 2}, 'RestartCount': 5,
           'HostConfig': {'RestartPolicy': {'Name': 'on-failure'}}}
    status = _service.status_from_inspect(doc)
    assert status['state'] == 'failed' and status['restarts'] == 5 and status['enabled']
    doc['State'] = {'Status': 'running', 'Pid': 77}
    assert _service.status_from_inspect(doc)['state'] == 'active'


def test_secrets_in_a_diff_are_names_only():
    old, new = 'VLLM_API_KEY=old-key\n', 'VLLM_API_KEY=new-key\n'
    assert _service.masked_secrets(new, old) == '# EnvironmentFile VLLM_API_KEY=<secret, changed>\n'
    assert _service.masked_secrets(new, new) == '# EnvironmentFile VLLM_API_KEY=<secret>\n'
    assert 'key' not in _service.fingerprint('unit', new).lower()
    assert _service.fingerprint('unit', new) == _service.fingerprint('unit', old)


# --- the engine's flow, against an in-memory service manager ------------------------------------------------------

def test_engine_new_same_changed_and_check_mode():
    mgr = FakeManager()
    checked = ensure(mgr, check=True)
    assert checked['changed'] and checked['action'] == 'started' and mgr.calls == [] and mgr.text is None
    first = ensure(mgr)
    assert first['changed'] and first['action'] == 'started' and first['health'] == 'healthy'
    assert first['diff']['before'] == '' and 'ExecStart=' in first['diff']['after']
    again = ensure(mgr)
    assert not again['changed'] and again['action'] == 'none' and mgr.calls == ['start']
    changed = ensure(mgr, env={'PYTHONHASHSEED': '1'})
    assert changed['action'] == 'restarted' and changed['reason'] == 'settings changed' and mgr.calls[-1] == 'restart'
    assert '-Environment="PYTHONHASHSEED=0"' not in changed['diff']['after']
    assert 'Environment="PYTHONHASHSEED=1"' in changed['diff']['after']


def test_engine_a_crash_loop_names_the_unit_and_shows_the_journal():
    res = ensure(FakeManager(crash=True), healthy=False)
    assert res['failed'] and res['state'] == 'stopped'
    assert_names(res['msg'], 'systemd unit', 'kvpool-vllm-a.service', 'restarted 5 time(s)', 'left failed/failed')
    assert_names(res['msg'], 'restart limit', '5 starts in 60 s')
    assert_names(res['msg'], 'ValueError', 'Unsupported connector type', 'NoSuchConnector')
    assert_names(res['msg'], 'Last lines of', 'journalctl -u kvpool-vllm-a')


def test_engine_stop_removes_the_unit_and_secret_and_says_so():
    mgr = FakeManager()
    ensure(mgr, secret_env={'VLLM_API_KEY': 'sk-1'})
    assert mgr.secret == 'VLLM_API_KEY=sk-1\n'
    new_key = ensure(mgr, secret_env={'VLLM_API_KEY': 'sk-2'})
    assert new_key['action'] == 'restarted' and 'sk-' not in str(new_key)
    assert '# EnvironmentFile VLLM_API_KEY=<secret, changed>' in new_key['diff']['after']
    stopped = ensure(mgr, state='stopped', secret_env={'VLLM_API_KEY': 'sk-2'})
    assert stopped['changed'] and stopped['action'] == 'stopped' and mgr.text is None and mgr.secret is None
    assert ensure(mgr, state='stopped')['changed'] is False


def test_engine_unhealthy_start_is_stopped_and_reported():
    mgr = FakeManager()
    res = ensure(mgr, healthy=False)
    assert res['failed'] and mgr.calls == ['start', 'stop']
    assert_names(res['msg'], 'not healthy', '0 s after its start')


# --- the systemd backend's calls (systemctl recorded, the unit directory under tmp) ----------------------------------

def test_systemd_backend_enables_with_the_wants_link_and_reloads_once_per_changed_unit(tmp_path, monkeypatch):
    monkeypatch.setattr(_service, 'UNIT_DIR', str(tmp_path))
    monkeypatch.setattr(_service, 'SECRET_DIR', str(tmp_path / 'secrets'))
    module = Recorder()
    be = _service.SystemdBackend(module)
    s = spec()
    text = _service.render_unit(s)
    be.apply(s, text, None, None, None, restart=False)
    link = tmp_path / 'multi-user.target.wants' / 'kvpool-vllm-a.service'
    # What `systemctl enable` makes for WantedBy=multi-user.target, without its own daemon-reload.
    assert link.is_symlink() and str(link.resolve()) == str(tmp_path / 'kvpool-vllm-a.service')
    assert module.calls == ['daemon-reload', 'reset-failed kvpool-vllm-a.service', 'start kvpool-vllm-a.service']
    module.calls[:] = []
    be.apply(s, text, None, text, None, restart=True)  # same unit, restarted (unhealthy, or a failed start limit)
    assert module.calls == ['reset-failed kvpool-vllm-a.service', 'restart kvpool-vllm-a.service']
    module.calls[:] = []
    be.stop(s)
    assert not link.exists() and not link.is_symlink() and not (tmp_path / 'kvpool-vllm-a.service').exists()
    assert module.calls == ['stop kvpool-vllm-a.service', 'daemon-reload', 'reset-failed kvpool-vllm-a.service']


class RestartingManager(FakeManager):
    """A unit in systemd's auto-restart window whose dead process started almost ready_timeout ago (its
    ExecMainStartTimestampMonotonic), then running again and healthy after a few polls."""

    def __init__(self):
        super().__init__()
        self.polls = 0

    def status(self, spec):
        import time as _time
        self.polls += 1
        show = SHOW_AUTO_RESTART if self.polls == 1 else SHOW_RUNNING
        status = _service.status_from_show(_service.parse_show(show))
        if self.polls == 1:  # the dead process's start: 0.29 s ago, of a 0.3 s ready_timeout
            status['started_mono'] = _time.monotonic() - 0.29
        return status


def test_engine_waits_ready_timeout_from_a_restart_not_from_the_dead_process():
    """Drill of issue 18: a master killed and in auto-restart while the gate runs got only the rest of its dead
    process's ready_timeout, failed its gate and was stopped. The wait now starts from the restart."""
    mgr = RestartingManager()
    mgr.text = _service.SystemdBackend.render(mgr, spec())[0]
    mgr.running = True
    module, dummy = fake_module()
    start = [None]
    import time as _time

    def healthy_after_a_while():
        start[0] = start[0] or _time.monotonic()
        return _time.monotonic() - start[0] > 0.15
    out = outcome(machine(module, mgr, ready_timeout=0.3, poll_interval=0.02), spec(), 'started',
                  dict(changed=False), lambda: [('healthy', healthy_after_a_while)])
    assert not out.get('failed'), out.get('msg')
    assert out['health'] == 'healthy' and 'stop' not in mgr.calls


def test_engine_peers_that_fail_fail_the_task_but_never_restart_or_stop_the_service():
    """An etcd member whose peer is down (or an HA master without a leader elsewhere): restarting the healthy one
    would cost the cluster its quorum. Found on the mock cluster: a re-run with one etcd member down restarted the
    two healthy ones."""
    mgr = FakeManager()
    ensure(mgr)  # started and healthy
    for check in (False, True):
        module, dummy = fake_module(check)
        out = outcome(machine(module, mgr, ready_timeout=0.2, poll_interval=0.05, what='etcd member node1'),
                      spec(), 'started', dict(changed=False), lambda: [('own /health', lambda: True)],
                      explain=lambda log: 'not healthy: node3',
                      peer_gate=lambda: [('every member healthy', lambda: False)])
        if check:  # check mode polls no peer
            assert not out.get('failed') and out['health'] == 'healthy'
        else:
            assert out['failed']
            assert_names(out['msg'], 'etcd member node1', 'healthy itself', 'its cluster is not')
            assert_names(out['msg'], 'waiting for', 'every member healthy', 'not healthy: node3')
    assert mgr.calls == ['start'] and mgr.running  # neither restarted nor stopped
    fresh = FakeManager()
    for peers_ok in (False, True):
        module, dummy = fake_module()
        out = outcome(machine(module, fresh, ready_timeout=0.2, poll_interval=0.05, what='etcd member node1'),
                      spec(), 'started', dict(changed=False), lambda: [('own /health', lambda: True)],
                      peer_gate=lambda ok=peers_ok: [('every member healthy', lambda: ok)])
        if peers_ok:
            assert not out.get('failed') and out['health'] == 'healthy'
        else:
            assert out['failed'] and fresh.calls == ['start'] and fresh.running


# --- the state machines raise, never exit -------------------------------------------------------------------------

def test_a_failed_start_raises_a_service_error_with_the_fields_a_failed_task_returns():
    module, dummy = fake_module()  # its exit_json / fail_json fail the test
    with pytest.raises(_service.ServiceError) as caught:
        machine(module, FakeManager(crash=True), ready_timeout=0.2, poll_interval=0.05).ensure(
            spec(), 'started', dict(changed=False), lambda: [('healthy', lambda: False)])
    fields = caught.value.result
    assert fields['unit'] == 'kvpool-vllm-a.service' and fields['logs'] == 'journalctl -u kvpool-vllm-a'
    assert fields['health'] == 'unhealthy' and fields['state'] == 'stopped' and fields['pid'] is None
    assert 'NoSuchConnector' in fields['log_tail'] and 'kvpool-vllm-a' in str(caught.value)


def test_a_success_returns_the_result_and_runs_finish():
    module, dummy = fake_module()
    seen = []
    result = machine(module, FakeManager(), finish=seen.append, ready_timeout=0.3, poll_interval=0.05).ensure(
        spec(), 'started', dict(changed=False), lambda: [('healthy', lambda: True)])
    assert result['health'] == 'healthy' and result['action'] == 'started' and seen == [result]


def test_no_library_code_exits_the_module():
    """Only a module's main() calls exit_json / fail_json (issue 31): not module_utils, not plugin_utils."""
    import glob
    import os
    import re
    root = os.path.dirname(os.path.dirname(os.path.abspath(_service.__file__)))
    calls = []
    for path in sorted(glob.glob(os.path.join(root, 'module_utils', '*.py'))
                       + glob.glob(os.path.join(root, 'plugin_utils', '*.py'))):
        with open(path) as handle:
            for number, line in enumerate(handle, 1):
                if re.search(r'\.(exit|fail)_json\(', line):
                    calls.append('%s:%d' % (os.path.basename(path), number))
    assert calls == []
