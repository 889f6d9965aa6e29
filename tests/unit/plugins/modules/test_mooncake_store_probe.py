# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""mooncake_store_probe with a stand-in ``mooncake.store`` package, its clients run as local processes.

The stand-in keeps objects in a directory and, like Mooncake, serves an object only while the client that put it
(the writer, whose segment holds it) is still alive: so these tests prove that the writer's holder keeps its segment
up between the put and the gets, and that remove takes it down. On a node the clients are transient systemd units
(``systemd-run``) or transient containers; here a small stand-in for that backend starts each client as a process
of its own session and stops it by its name, as ``systemctl stop`` does. The module runs its real client script
(``python -c``). The real store and transient units are exercised by the molecule scenario ``mooncake``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _proc
from ansible_collections.ascend.kvpool.plugins.modules import mooncake_store_probe
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

FAKE_STORE = r'''
import json, os, time
ROOT = os.environ["FAKE_STORE_DIR"]


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


class MooncakeDistributedStore(object):
    def setup(self, local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol, device_name,
              master_server_address):
        with open(os.path.join(ROOT, "setup-%d.json" % os.getpid()), "w") as fh:
            json.dump([local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
                       device_name, master_server_address], fh)
        with open(os.path.join(ROOT, "env-%d.json" % os.getpid()), "w") as fh:  # what the real client reads at setup
            json.dump({"MC_STORE_CLUSTER_ID": os.environ.get("MC_STORE_CLUSTER_ID")}, fh)
        if os.environ.get("FAKE_SETUP_HANG"):
            time.sleep(3600)
        return int(os.environ.get("FAKE_SETUP_RC", "0"))

    def put(self, key, data):
        # FAKE_PUT_FAIL="N:RC": the first N puts return RC (N = -1: every put), as Mooncake's put returns an error code.
        fail = os.environ.get("FAKE_PUT_FAIL")
        if fail:
            count, rc = (int(x) for x in fail.split(":"))
            path = os.path.join(ROOT, "puts")
            done = int(open(path).read()) if os.path.exists(path) else 0
            with open(path, "w") as fh:
                fh.write(str(done + 1))
            if count < 0 or done < count:
                return rc
        with open(os.path.join(ROOT, key + ".bin"), "wb") as fh:
            fh.write(data)
        with open(os.path.join(ROOT, key + ".owner"), "w") as fh:
            fh.write(str(os.getpid()))
        return 0

    def get(self, key):
        try:
            with open(os.path.join(ROOT, key + ".owner")) as fh:
                owner = int(fh.read())
            if not _alive(owner):
                return b""               # the writer's segment is gone, and the object with it
            with open(os.path.join(ROOT, key + ".bin"), "rb") as fh:
                data = fh.read()
        except (IOError, OSError):
            return b""
        if os.environ.get("FAKE_CORRUPT"):  # every bit of the first byte flipped: never the same byte again
            data = bytes([data[0] ^ 0xFF]) + data[1:] if data else b"x"
        return data

    def remove(self, key):
        for ext in (".bin", ".owner"):
            try:
                os.unlink(os.path.join(ROOT, key + ext))
            except OSError:
                pass
        return 0

    def close(self):
        gate = os.environ.get("FAKE_CLOSE_GATE")  # Mooncake's close takes about 2 s; the gate holds it open
        while gate and not os.path.exists(gate):
            time.sleep(0.02)
        return 0
'''


class Transients(object):
    """Transient 'units' as local processes: run by name, alive, stopped by name (the whole session), logs."""

    kind = 'local'

    def __init__(self, tmp):
        self.tmp, self.procs = tmp, {}

    def check(self):
        pass

    def logs_hint(self, spec):
        return 'journalctl -u %s' % spec.unit

    def run_transient(self, name, argv, max_seconds, mounts=()):
        self.stop_transient(name)
        log = open(str(self.tmp / ('%s.log' % name)), 'wb')
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def transient_alive(self, name):
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def stop_transient(self, name):
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def transient_logs(self, name, lines=20):
        path = self.tmp / ('%s.log' % name)
        return '\n'.join(path.read_text().splitlines()[-lines:]) if path.exists() else ''

    def pid(self, name):
        proc = self.procs.get(name)
        return proc.pid if proc is not None and proc.poll() is None else None


@pytest.fixture
def env(tmp_path, monkeypatch):
    pkg = tmp_path / 'lib' / 'mooncake'
    pkg.mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'store.py').write_text(FAKE_STORE)
    store = tmp_path / 'store'
    store.mkdir()
    monkeypatch.setenv('PYTHONPATH', str(tmp_path / 'lib'))
    monkeypatch.setenv('FAKE_STORE_DIR', str(store))
    backend = Transients(tmp_path)
    monkeypatch.setattr(mooncake_store_probe, 'backend_for', lambda module, container=None: backend)
    master = socket.socket()
    master.bind(('127.0.0.1', 0))
    master.listen(16)
    address = '127.0.0.1:%d' % master.getsockname()[1]
    config = tmp_path / 'mooncake.json'
    config.write_text(json.dumps({'metadata_server': 'P2PHANDSHAKE', 'protocol': 'tcp', 'device_name': '',
                                  'master_server_address': address, 'global_segment_size': '4GB',
                                  'local_buffer_size': 1073741824}))
    env = {'tmp': tmp_path, 'store': store, 'config': str(config), 'address': address, 'master': master,
           'state_dir': str(tmp_path / 'state'), 'backend': backend}
    yield env
    master.close()
    for name in list(backend.procs):
        backend.stop_transient(name)


def run(env, capsys, check=False, **args):
    params = dict(config_path=env['config'], python=sys.executable, state_dir=env['state_dir'], key='probe-1',
                  timeout=20, poll_interval=0.02)
    params.update(args)
    if check:
        params['_ansible_check_mode'] = True
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            mooncake_store_probe.main()
    return json.loads(capsys.readouterr().out)


def setups(env):
    out = []
    for name in sorted(os.listdir(str(env['store']))):
        if name.startswith('setup-'):
            with open(str(env['store'] / name)) as fh:
                out.append(json.load(fh))
    return out


def cluster_ids(env):
    """The MC_STORE_CLUSTER_ID every client had at its setup (None: unset), in the order of their pids."""
    out = []
    for name in sorted(os.listdir(str(env['store']))):
        if name.startswith('env-'):
            with open(str(env['store'] / name)) as fh:
                out.append(json.load(fh)['MC_STORE_CLUSTER_ID'])
    return out


def exits(env, name):
    return _proc.wait_until([('exited', lambda: not env['backend'].transient_alive(name))], 10, 0.02)['ready']


HOLDER = mooncake_store_probe.unit_for('probe-1', 'put')
READER = mooncake_store_probe.unit_for('probe-1', 'get')


def test_put_get_remove_across_a_kept_segment(env, capsys):
    put = run(env, capsys, mode='put', size_bytes=3 * 1024 * 1024 + 1, local_hostname='10.0.0.1', node_name='node1')
    assert put['changed'] and put['size_bytes'] == 3 * 1024 * 1024 + 1, put
    data = (env['store'] / 'probe-1.bin').read_bytes()
    assert put['sha256'] == hashlib.sha256(data).hexdigest()
    assert put['latency_ms'] >= 0 and put['throughput_MBps'] > 0 and put['setup_ms'] >= 0
    assert put['master_server_address'] == env['address']
    assert put['holder_unit'] == HOLDER and env['backend'].transient_alive(HOLDER)  # the writer stays up

    got = run(env, capsys, mode='get', expected_sha256=put['sha256'], local_hostname='10.0.0.2', node_name='node2')
    assert not got['changed'] and got['sha256'] == put['sha256'] and got['size_bytes'] == put['size_bytes']
    assert got['latency_ms'] >= 0 and got['throughput_MBps'] > 0

    # The clients used the file's master, metadata server and protocol; the writer contributes a segment sized for
    # the probe (2 x object, at least 64 MiB), the reader none.
    writer, reader = sorted(setups(env), key=lambda s: s[0])
    assert writer == ['10.0.0.1', 'P2PHANDSHAKE', 64 * 1024 * 1024, 16 * 1024 * 1024, 'tcp', '', env['address']]
    assert reader[0] == '10.0.0.2' and reader[2] == 0 and reader[6] == env['address']

    removed = run(env, capsys, mode='remove')
    assert removed['changed'] and removed['holder_unit'] == HOLDER
    assert exits(env, HOLDER)
    assert not (env['store'] / 'probe-1.bin').exists()                 # the holder removed the object on its way out
    assert not run(env, capsys, mode='remove')['changed']


def test_get_returns_before_its_client_closes_and_remove_waits_for_the_writer(env, capsys, monkeypatch):
    # Mooncake's store.close() joins the client's threads for about 2 s. A reader (no segment) reports first and
    # closes on its own; the writer's holder must be gone at remove's return: objects that other clients store in
    # its segment meanwhile would be lost when it unmounts.
    gate = env['tmp'] / 'close-gate'
    monkeypatch.setenv('FAKE_CLOSE_GATE', str(gate))
    put = run(env, capsys, mode='put', local_hostname='10.0.0.1', node_name='node1')
    got = run(env, capsys, mode='get', expected_sha256=put['sha256'], local_hostname='10.0.0.2', node_name='node2')
    assert got['sha256'] == put['sha256']
    assert env['backend'].transient_alive(READER)                     # still closing, and the module returned
    gate.write_text('')
    removed = run(env, capsys, mode='remove')
    assert removed['changed'] and not (env['store'] / 'probe-1.bin').exists()
    assert not env['backend'].transient_alive(HOLDER)                 # closed and gone at return
    assert sorted(os.listdir(env['state_dir'])) == []                   # no file is left behind
    assert exits(env, READER)


def test_reader_fails_naming_the_node_when_the_object_is_gone(env, capsys):
    run(env, capsys, mode='put', local_hostname='10.0.0.1')
    run(env, capsys, mode='remove')
    res = run(env, capsys, mode='get', local_hostname='10.0.0.2', node_name='node2')
    assert res['failed']
    assert_names(res['msg'], 'node2 (10.0.0.2)', 'could not read probe-1', 'master %s' % env['address'])
    assert 'key not found' in res['msg']


def test_checksum_mismatch_names_the_node_and_both_sums(env, capsys, monkeypatch):
    put = run(env, capsys, mode='put', local_hostname='10.0.0.1')
    monkeypatch.setenv('FAKE_CORRUPT', '1')
    res = run(env, capsys, mode='get', expected_sha256=put['sha256'], local_hostname='10.0.0.2', node_name='node2')
    assert res['failed']
    assert_names(res['msg'], 'node2 (10.0.0.2)', 'read probe-1')
    assert put['sha256'] in res['msg'] and "differs from the writer's" in res['msg']
    run(env, capsys, mode='remove')


def test_unreachable_master_fails_fast(env, capsys):
    env['master'].close()
    res = run(env, capsys, mode='get', local_hostname='10.0.0.2', node_name='node2', master_connect_timeout=1)
    assert res['failed']
    assert_names(res['msg'], 'node2', 'cannot reach', 'Mooncake master at %s' % env['address'])
    assert setups(env) == [] and env['backend'].procs == {}              # no client was started


def test_setup_failure_and_hang(env, capsys, monkeypatch):
    monkeypatch.setenv('FAKE_SETUP_RC', '-1')
    res = run(env, capsys, mode='put', local_hostname='10.0.0.1', node_name='node1')
    assert res['failed']
    assert_names(res['msg'], 'node1 (10.0.0.1)', 'could not write probe-1')
    assert 'store setup returned -1' in res['msg']
    # The client's Python and its Mooncake (the distribution of this venv, if any) are named, with the fix for a
    # client of another release than the master's.
    assert sys.executable in res['msg'] and '(Mooncake ' in res['msg']
    assert 'mooncake_config_probe_python' in res['msg']
    assert not env['backend'].transient_alive(HOLDER)                 # the failed writer was stopped again
    monkeypatch.delenv('FAKE_SETUP_RC')
    monkeypatch.setenv('FAKE_SETUP_HANG', '1')
    res = run(env, capsys, mode='get', local_hostname='10.0.0.2', node_name='node2', timeout=1)
    assert res['failed'] and 'timed out after 1.0 s' in res['msg']
    assert not env['backend'].transient_alive(READER)                 # its unit was stopped


def test_check_mode_runs_nothing(env, capsys):
    res = run(env, capsys, check=True, mode='put', local_hostname='10.0.0.1')
    assert not res['changed'] and 'check mode' in res['msg']
    assert setups(env) == [] and not os.path.isdir(env['state_dir']) and env['backend'].procs == {}


def test_bad_inputs(env, capsys):
    res = run(env, capsys, mode='get', local_hostname='h', node_name='node2', config_path=str(env['tmp'] / 'nope.json'))
    assert res['failed'] and res['msg'].startswith('node2: ') and 'mooncake_config' in res['msg']
    (env['tmp'] / 'bad.json').write_text('{not json')
    res = run(env, capsys, mode='get', local_hostname='h', config_path=str(env['tmp'] / 'bad.json'))
    assert 'not valid JSON' in res['msg']
    assert 'local_hostname' in run(env, capsys, mode='put')['msg']
    res = run(env, capsys, mode='get', local_hostname='h', python='no-such-python-kvpool')
    assert res['failed']
    assert_names(res['msg'], 'no-such-python-kvpool', 'not found')


def test_config_sizes_can_be_used(env, capsys):
    run(env, capsys, mode='put', local_hostname='10.0.0.1', use_config_sizes=True)
    (writer,) = setups(env)
    assert writer[2:4] == [4 * 1024 ** 3, 1024 ** 3]                   # "4GB" and 1073741824 from the file
    run(env, capsys, mode='remove')


def test_a_put_that_fails_in_transfer_is_tried_again_until_it_lands(env, capsys, monkeypatch):
    # -800 (TRANSFER_FAIL): the master placed the object in the segment of a client that has just gone (an instance
    # restarted; it is listed until its client TTL). The writer tries again; the result counts the attempts.
    monkeypatch.setenv('FAKE_PUT_FAIL', '2:-800')
    put = run(env, capsys, mode='put', local_hostname='10.0.0.1', node_name='node1')
    assert not put.get('failed') and put['put_attempts'] == 3, put
    assert (env['store'] / 'probe-1.bin').exists()
    run(env, capsys, mode='remove')


def test_a_put_error_other_than_a_transfer_failure_is_not_retried(env, capsys, monkeypatch):
    monkeypatch.setenv('FAKE_PUT_FAIL', '-1:-200')
    res = run(env, capsys, mode='put', local_hostname='10.0.0.1', node_name='node1')
    assert res['failed'], res['msg']
    assert_names(res['msg'], 'put returned -200', '1 attempt(s)')
    assert not env['backend'].transient_alive(HOLDER)


def test_a_transfer_failure_that_lasts_ends_before_the_timeout_and_says_so(env, capsys, monkeypatch):
    monkeypatch.setenv('FAKE_PUT_FAIL', '-1:-800')
    res = run(env, capsys, mode='put', local_hostname='10.0.0.1', node_name='node1', timeout=4)
    assert res['failed'] and 'put returned -800 (' in res['msg'], res['msg']
    attempts = int(res['msg'].split('put returned -800 (')[1].split(' ')[0])
    assert attempts >= 2 and 'timed out' not in res['msg']
    assert not env['backend'].transient_alive(HOLDER)


def test_the_clients_get_the_pools_cluster_id_and_none_without_it(env, capsys, monkeypatch):
    # With HA masters a store client reads the leader under mooncake-store/<MC_STORE_CLUSTER_ID>/master_view: the
    # writer and the readers get the pool's id, as the instances do.
    monkeypatch.delenv('MC_STORE_CLUSTER_ID', raising=False)
    put = run(env, capsys, mode='put', local_hostname='10.0.0.1', cluster_id='kvpool-0123456789')
    got = run(env, capsys, mode='get', expected_sha256=put['sha256'], local_hostname='10.0.0.2',
              cluster_id='kvpool-0123456789')
    assert not got.get('failed') and cluster_ids(env) == ['kvpool-0123456789'] * 2, got
    run(env, capsys, mode='remove')
    for name in os.listdir(str(env['store'])):
        os.unlink(str(env['store'] / name))
    run(env, capsys, mode='get', local_hostname='10.0.0.2')       # no cluster id: the variable is not set at all
    assert cluster_ids(env) == [None]


def test_a_failed_setup_behind_ha_masters_names_the_leader_key_and_the_variable(env, capsys, monkeypatch):
    (env['tmp'] / 'ha.json').write_text(json.dumps({'metadata_server': 'P2PHANDSHAKE', 'protocol': 'tcp',
                                                    'master_server_address': 'etcd://127.0.0.1:2379'}))
    monkeypatch.setenv('FAKE_SETUP_RC', '-600')  # Mooncake: "No master is available in HA backend"
    res = run(env, capsys, mode='get', local_hostname='10.0.0.2', node_name='node2',
              config_path=str(env['tmp'] / 'ha.json'), cluster_id='kvpool-0123456789')
    assert res['failed'] and cluster_ids(env) == ['kvpool-0123456789'], res
    assert_names(res['msg'], 'node2', 'store setup returned -600', 'mooncake-store/kvpool-0123456789/master_view',
                 '--cluster_id', 'kvpool_cluster_id', 'mooncake_config_cluster_id')
