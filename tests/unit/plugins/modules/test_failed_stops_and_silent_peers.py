# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input, round two (issue 32), what an audit found still wrong:

- **A failed stop taken as stopped.** `systemctl stop` that exits 1 ("Access denied") while the unit still runs:
  the task fails naming the unit and the fix, and the unit file, enable link and secret file stay (they were
  removed, the process kept serving and the task said "stopped"). The pool probe's transient units and containers
  likewise (never "nothing is left behind").
- **A transient unit or container that is not ours.** The pool probe stops, resets or removes a unit or container
  of its name only when it carries the probe's Description (systemd) or label (docker).
- **No answer taken as an answer.** An HA master that does not answer at all (timeout, unreachable) is never a
  standby; `etcdctl member list` that says "context deadline exceeded" while a peer accepts connections (members
  up, no quorum) is never "no other member answers", which would bootstrap a new cluster beside the live one.

Stub tools are shell scripts under tmp that answer per verb from files and log their calls; peers are loopback
listeners (or a black-holed address that never answers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _service
from ansible_collections.ascend.kvpool.plugins.modules import (
    etcd_member,
    mooncake_master,
    mooncake_store_probe,
    vllm_router,
)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils import service_fakes as engine_tests
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port

ACCESS_DENIED = 'Failed to stop kvpool-router.service: Access denied'

STUB = r"""#!/bin/sh
# A stub of %(tool)s: logs its arguments; a verb (its first argument) with a file <verb>.rc answers from
# <verb>.out / .err and exits with that code; any other verb answers as "any" does, or exits 0.
echo "$*" >> "%(dir)s/calls"
verb="$1"
if [ ! -f "%(dir)s/$verb.rc" ]; then verb=any; fi
if [ -f "%(dir)s/$verb.rc" ]; then
    if [ -f "%(dir)s/$verb.err" ]; then cat "%(dir)s/$verb.err" >&2; fi
    if [ -f "%(dir)s/$verb.out" ]; then cat "%(dir)s/$verb.out"; fi
    exit "$(cat "%(dir)s/$verb.rc")"
fi
exit 0
"""


class Tool(object):
    """One stub tool under tmp: what each verb answers (``answer``) and what it was asked (``calls``)."""

    def __init__(self, tmp_path, name):
        self.dir = tmp_path / ('stub-' + name)
        self.dir.mkdir()
        self.path = str(self.dir / name)
        with open(self.path, 'w') as fh:
            fh.write(STUB % dict(tool=name, dir=self.dir))
        os.chmod(self.path, 0o755)

    def answer(self, verb, out='', rc=0, err=''):
        for ext, text in (('out', out), ('err', err), ('rc', '%d\n' % rc)):
            (self.dir / ('%s.%s' % (verb, ext))).write_text(text)

    def calls(self):
        path = self.dir / 'calls'
        return path.read_text().splitlines() if path.exists() else []


class Module(object):
    """What the backends need of an AnsibleModule: run_command (for real, so the stub runs) and get_bin_path."""

    check_mode = False

    def __init__(self, bins):
        self.bins = bins

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.bins.get(name, '/usr/bin/' + name)

    def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                              universal_newlines=True)
        return proc.returncode, proc.stdout, proc.stderr


def run(module, **params):
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            module.main()


# --- a failed stop ---------------------------------------------------------------------------------------------

def test_a_failed_systemctl_stop_of_the_router_is_no_stop_and_removes_nothing(monkeypatch, tmp_path, capsys):
    systemctl = Tool(tmp_path, 'systemctl')
    systemctl.answer('show', engine_tests.SHOW_RUNNING)  # show works, the stop is refused
    systemctl.answer('stop', rc=1, err=ACCESS_DENIED + '\n')
    units = tmp_path / 'units'
    wants = units / 'multi-user.target.wants'
    wants.mkdir(parents=True)
    monkeypatch.setattr(_service, 'UNIT_DIR', str(units))
    monkeypatch.setattr(_service, 'SECRET_DIR', str(tmp_path / 'secrets'))
    spec = _service.ServiceSpec('kvpool-router', 'vllm-router router', ['/bin/true'],
                                owner='ascend.kvpool.vllm_router')
    unit = units / 'kvpool-router.service'
    unit.write_text(_service.render_unit(spec))
    os.symlink(str(unit), str(wants / 'kvpool-router.service'))

    def backend_for(module, container=None):
        be = _service.SystemdBackend(module)
        be.systemctl = be.journalctl = systemctl.path
        return be
    monkeypatch.setattr(vllm_router, 'backend_for', backend_for)
    binary = tmp_path / 'vllm-router'
    binary.write_text('#!/bin/sh\n')
    binary.chmod(0o755)
    run(vllm_router, state='stopped', binary=str(binary), port=free_port(), prometheus_port=free_port(),
        ready_timeout=1, poll_interval=0.02, worker_urls=['http://127.0.0.1:%d' % free_port()])
    res = json.loads(capsys.readouterr().out)
    assert res.get('failed'), res
    assert_names(res['msg'], 'systemctl stop kvpool-router.service', 'Access denied',
                 'kvpool-router.service is still active', 'unit file, enable link and secret file were kept', 'Fix')
    assert res.get('state') != 'stopped' and not res.get('changed')
    assert unit.exists() and os.path.islink(str(wants / 'kvpool-router.service'))
    assert not any(c.startswith('daemon-reload') or c.startswith('reset-failed') for c in systemctl.calls())


def test_a_failed_stop_of_the_probes_holder_is_never_nothing_left_behind(monkeypatch, tmp_path, capsys):
    """mooncake_store_probe mode=remove over the real systemd backend: the holder still runs after a refused stop."""
    systemctl = Tool(tmp_path, 'systemctl')
    holder = mooncake_store_probe.unit_for('probe-1', 'put')
    systemctl.answer('show', 'LoadState=loaded\nActiveState=active\nDescription=%s %s\n'
                     % (_service.PROBE_DESCRIPTION, holder))
    systemctl.answer('stop', rc=1, err='Failed to stop %s.service: Access denied\n' % holder)

    def backend_for(module, container=None):
        be = _service.SystemdBackend(module)
        be.systemctl = be.journalctl = systemctl.path
        return be
    monkeypatch.setattr(mooncake_store_probe, 'backend_for', backend_for)
    run(mooncake_store_probe, mode='remove', key='probe-1', state_dir=str(tmp_path / 'state'), node_name='node1')
    res = json.loads(capsys.readouterr().out)
    assert res.get('failed') and not res.get('changed'), res
    assert_names(res['msg'], 'node1', 'systemctl stop %s.service' % holder, 'Access denied',
                 '%s.service is still active' % holder, 'it was left as it is', 'Fix')
    assert 'stop %s.service' % holder in systemctl.calls()


# --- a transient unit or container that is not ours ------------------------------------------------------------

def test_the_probe_never_stops_or_removes_a_unit_or_container_of_its_name_that_is_not_its_own(tmp_path):
    name = mooncake_store_probe.unit_for('probe-1', 'put')
    systemctl = Tool(tmp_path, 'systemctl')
    systemctl.answer('show', 'LoadState=loaded\nActiveState=active\nDescription=my own service\n')
    be = _service.SystemdBackend(Module({}))
    be.systemctl = systemctl.path
    for call in (be.transient_alive, be.stop_transient, lambda n: be.run_transient(n, ['/bin/true'], 5)):
        with pytest.raises(_service.ServiceError) as err:
            call(name)
        assert_names(str(err.value), '%s.service' % name, 'not a probe unit of ascend.kvpool', 'my own service',
                     'Fix', 'systemctl stop %s.service' % name)
    assert [c for c in systemctl.calls() if not c.startswith('show')] == []
    systemctl.answer('show', 'LoadState=not-found\nActiveState=inactive\nDescription=%s.service\n' % name)
    be.stop_transient(name)  # no such unit: nothing to do
    assert [c for c in systemctl.calls() if not c.startswith('show')] == []
    systemctl.answer('show', 'LoadState=loaded\nActiveState=active\nDescription=%s %s\n'
                     % (_service.PROBE_DESCRIPTION, name))
    be.stop_transient(name)  # ours: stopped
    assert systemctl.calls()[-1] == 'stop %s.service' % name

    docker = Tool(tmp_path, 'docker')
    theirs = engine_tests.container_doc()
    theirs['Config']['Labels'] = {'com.example.owner': 'someone'}
    docker.answer('inspect', json.dumps([theirs]))
    dbe = _service.DockerBackend(Module({'docker': docker.path}), engine_tests.TEMPLATE)
    dbe._template = {'image': 'img', 'binds': [], 'shm_size': 0, 'devices': []}
    for call in (dbe.transient_alive, dbe.stop_transient, lambda n: dbe.run_transient(n, ['/bin/true'], 5)):
        with pytest.raises(_service.ServiceError) as err:
            call(name)
        assert_names(str(err.value), 'container %s' % name, 'not a probe container of ascend.kvpool',
                     '%s=1' % _service.PROBE_LABEL, 'Fix', 'docker rename %s' % name)
    assert [c for c in docker.calls() if not c.startswith('inspect')] == []
    docker.answer('inspect', rc=1, err='Error: No such object: %s\n' % name)
    dbe.stop_transient(name)  # no such container: nothing to do
    dbe.run_transient(name, ['/bin/true'], 5)  # nothing in the way: no rm, the run
    assert [c.split()[0] for c in docker.calls() if not c.startswith('inspect')] == ['run']
    ours = engine_tests.container_doc()
    ours['Config']['Labels'] = {_service.PROBE_LABEL: '1'}
    docker.answer('inspect', json.dumps([ours]))
    docker.answer('stop', rc=1, err='Error response from daemon: cannot stop container: permission denied\n')
    with pytest.raises(_service.ServiceError) as err:  # ours, still running after a failed stop
        dbe.stop_transient(name)
    assert_names(str(err.value), 'docker stop %s failed' % name, 'permission denied', 'still runs', 'Fix')


# --- no answer taken as an answer ------------------------------------------------------------------------------

class BlackHole(object):
    """A loopback port that never answers, as a black-holed address: a listener whose accept queue is full (and
    never accepted), so the kernel drops every further SYN and a connection times out, never refused (a real
    black-holed address may be refused by this machine's sandbox)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers = []
        while len(self.fillers) < 3:
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(('127.0.0.1', self.port))
            self.fillers.append(filler)
        time.sleep(0.05)

    def close(self):
        for sock in self.fillers + [self.sock]:
            sock.close()


class GateOnly(object):
    """The lifecycle's place: records the gates the module hands it, runs nothing."""

    def __init__(self, seen):
        self.seen = seen

    def ensure(self, spec, state, result, gate, explain=None, peer_gate=None, port_taken=None):
        self.seen.update(peer_gate=peer_gate, explain=explain, result=result)
        return result


def test_an_ha_master_that_does_not_answer_at_all_fails_the_gate_naming_it(monkeypatch, capsys, tmp_path):
    """mooncake_master's HA gate with this master serving RPC on loopback, a peer that refuses (up, a standby) and a
    peer at a black-holed address (was: a standby too, and the gate passed)."""
    rpc = socket.socket()
    rpc.bind(('127.0.0.1', 0))
    rpc.listen(8)
    hole = BlackHole()
    seen = {}
    monkeypatch.setattr(mooncake_master, 'lifecycle_for', lambda *a, **kw: GateOnly(seen))
    try:
        run(mooncake_master, binary=sys.executable, port=rpc.getsockname()[1], metrics_port=free_port(),
            rpc_address='127.0.0.1', enable_ha=True, etcd_endpoints=['127.0.0.1:%d' % free_port()], ha_name='n1',
            ha_peers=[dict(name='n2', rpc='127.0.0.1:%d' % free_port(), health='http://127.0.0.1:%d/health'
                           % free_port()),
                      dict(name='n3', rpc='127.0.0.1:%d' % hole.port,
                           health='http://127.0.0.1:%d/health' % hole.port)],
            ready_timeout=1, poll_interval=0.02)
        assert not json.loads(capsys.readouterr().out).get('failed')
        assert seen['peer_gate']()[0][1]() is False  # the election check does not pass
    finally:
        rpc.close()
        hole.close()
    ha = seen['result']['ha']
    assert ha['leader_name'] == 'n1' and ha['standbys'] == ['n2']
    assert_names(ha['problem'], 'n3: no answer from rpc 127.0.0.1:%d (timed out)' % hole.port, 'state unknown',
                 'Fix', 'ha_peers')
    assert_names(seen['explain'](''), 'n3: no answer from rpc')


DEADLINE = ('{"level":"warn","ts":"2026-12-05T19:00:00Z","caller":"clientv3/retry_interceptor.go:62","msg":"retrying '
            'of unary invoker failed","target":"endpoint://client/127.0.0.2:2379","attempt":0,"error":"rpc error: '
            'code = DeadlineExceeded desc = context deadline exceeded"}\nError: context deadline exceeded\n')


# etcdctl endpoint status of a member that ran a cluster and lost its quorum: served locally, leader 0 (SIMULATED,
# the layout of etcdctl 3.5's -w json).
NO_LEADER = ('[{"Endpoint":"127.0.0.2:%d","Status":{"header":{"cluster_id":14841639068965178418,"member_id":'
             '10276657743932975437,"revision":9,"raft_term":3},"version":"3.5.17","dbSize":20480,"leader":0,'
             '"raftIndex":42,"raftTerm":3,"raftAppliedIndex":42,"errors":["etcdserver: no leader"],'
             '"dbSizeInUse":20480}}]')


def _etcdctl_stub(tmp_path, status_out):
    """etcdctl whose member list says "context deadline exceeded"; endpoint status prints ``status_out`` (empty:
    the same deadline, as a member still in its first bootstrap answers no request)."""
    path = tmp_path / 'etcdctl'
    status = ('echo \'%s\'' % status_out) if status_out else 'echo "Error: context deadline exceeded" >&2; exit 1'
    path.write_text('#!/bin/sh\ncase "$*" in\n  *"endpoint status"*) %s ;;\n  *) printf %%s \'%s\' >&2; exit 1 ;;\n'
                    'esac\n' % (status, DEADLINE.replace("'", '')))
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def etcd_peer(monkeypatch, tmp_path):
    """etcd_member on a stub systemctl with no unit installed, and node2's client port: a loopback listener that
    accepts TCP (the peer's etcd runs). Yields (systemctl stub, units dir, the listener, its port)."""
    systemctl = Tool(tmp_path, 'systemctl')
    systemctl.answer('show', engine_tests.SHOW_MISSING)
    units = tmp_path / 'units'
    units.mkdir()
    monkeypatch.setattr(_service, 'UNIT_DIR', str(units))
    monkeypatch.setattr(etcd_member, 'UNIT_DIR', str(units))

    def backend_for(module, container=None):
        be = _service.SystemdBackend(module)
        be.systemctl = be.journalctl = systemctl.path
        return be
    monkeypatch.setattr(etcd_member, 'backend_for', backend_for)
    # A member list that never gets an answer is asked again for QUORUM_GRACE s (6 s) before a lost quorum is
    # concluded; 1 s still asks it again (every 0.5 s) and then concludes, without 6 s of waiting per run.
    monkeypatch.setattr(etcd_member, 'QUORUM_GRACE', 1.0)
    peer = socket.socket()
    peer.bind(('127.0.0.2', 0))
    peer.listen(8)
    yield systemctl, units, peer, peer.getsockname()[1]
    peer.close()


@pytest.mark.parametrize('check', [True, False])
def test_etcd_deadline_exceeded_while_a_member_accepts_connections_is_no_new_cluster(etcd_peer, capsys, tmp_path,
                                                                                     check):
    """etcdctl says "context deadline exceeded" for members that run without a quorum too: node2 accepts TCP on its
    client port (a loopback listener) and answers endpoint status with no leader (it ran a cluster), so it is a
    failed read naming node2's endpoint, never join.action=new."""
    systemctl, units, peer, port = etcd_peer
    etcdctl = _etcdctl_stub(tmp_path, NO_LEADER % port)
    params = dict(name='node1', address='127.0.0.1', etcdctl=etcdctl, binary=sys.executable,
                  data_dir=str(tmp_path / 'etcd'), ready_timeout=1, poll_interval=0.05, _ansible_check_mode=check,
                  members=[dict(name='node1', address='127.0.0.1'),
                           dict(name='node2', address='127.0.0.2', client_port=port)])
    try:
        run(etcd_member, **params)
        res = json.loads(capsys.readouterr().out)
    finally:
        peer.close()
    assert res.get('failed'), res
    assert_names(res['msg'], 'etcd member node1', '--endpoints=127.0.0.2:%d member list' % port,
                 'context deadline exceeded', '127.0.0.2:%d accepts TCP connections' % port, 'quorum',
                 'nothing was changed', 'Fix', 'restore the quorum', 'initial_cluster_state=new')
    assert (res.get('join') or {}).get('action') != 'new'
    assert [c for c in systemctl.calls() if not c.startswith('show')] == [] and os.listdir(str(units)) == []
    run(etcd_member, **params)  # the member stopped: nothing accepts connections, a first deploy
    res = json.loads(capsys.readouterr().out)
    assert res['join']['action'] == 'new' and 'no other member answers' in res['join']['reason'], res


def test_etcd_members_starting_in_the_same_first_deploy_are_no_live_cluster(etcd_peer, capsys, tmp_path):
    """A first deploy runs the members in parallel: node2's etcd already listens (accepts TCP) but, waiting for its
    peers, answers no request (etcd serves clients only once ready), so endpoint status times out too. That is the
    same bootstrap, never "a cluster without quorum": node1 starts with the static bootstrap (join new)."""
    dummy_systemctl, dummy_units, peer, port = etcd_peer
    try:
        run(etcd_member, name='node1', address='127.0.0.1', etcdctl=_etcdctl_stub(tmp_path, ''),
            binary=sys.executable, data_dir=str(tmp_path / 'etcd'), ready_timeout=1, poll_interval=0.05,
            _ansible_check_mode=True, members=[dict(name='node1', address='127.0.0.1'),
                                               dict(name='node2', address='127.0.0.2', client_port=port)])
        res = json.loads(capsys.readouterr().out)
    finally:
        peer.close()
    assert not res.get('failed'), res
    assert res['join']['action'] == 'new', res
