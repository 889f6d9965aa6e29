# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""mooncake_master with the OpLog (issue 35): the flags per Mooncake version, and the namespace check before the
master starts, against a small stand-in of etcd's HTTP gateway on this host (``/v3/kv/range`` and ``/v3/kv/txn``
with etcd's semantics for what the module sends: a prefix range with keys_only/limit/count, one key, and the guarded
delete). The real etcd's answers to the same requests are recorded in module_utils/fixtures/etcd/oplog_*.json and
read in test_etcd.py; the real master on a real etcd runs in the molecule scenario ha."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules import service_harness
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.service_harness import master

manager = service_harness.manager
CID = 'kvpool-33d2331b2a'
LEGACY = {'/oplog/%s/00000000000000000001' % CID: 'e1', '/oplog/%s/latest' % CID: '1'}
OTHER_POOL = {'/oplog/other-pool/latest': '7', '/oplog/other-pool/00000000000000000007': 'e7'}


class FakeEtcd(object):
    """etcd's HTTP gateway for the requests the module makes (keys and values base64, revisions as text)."""

    def __init__(self, data):
        self.data, self.requests, self.port = dict(data), [], free_port()
        fake = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                fake.requests.append((self.path, body))
                answer = fake.answer(self.path, body)
                raw = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header('Content-Length', str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass
        self.srv = ThreadingHTTPServer(('127.0.0.1', self.port), H)
        threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()

    def _keys(self, body):
        key = base64.b64decode(body['key']).decode()
        if 'range_end' not in body:
            return [key] if key in self.data else []
        end = base64.b64decode(body['range_end']).decode()
        return sorted(k for k in self.data if key <= k < end)

    def answer(self, path, body):
        header = {'cluster_id': '1', 'member_id': '2', 'revision': '9', 'raft_term': '2'}
        if path == '/v3/kv/range':
            keys = self._keys(body)
            shown = keys[:body['limit']] if body.get('limit') else keys
            kvs = []
            for k in shown:
                kv = dict(key=base64.b64encode(k.encode()).decode(), create_revision='3', mod_revision='3', version='1')
                if not body.get('keys_only'):
                    kv['value'] = base64.b64encode(self.data[k].encode()).decode()
                kvs.append(kv)
            return dict(header=header, **({'kvs': kvs, 'count': str(len(keys))} if keys else {}))
        compare = body['compare'][0]
        held = base64.b64decode(compare['key']).decode() in self.data
        if held:
            return {'header': header}
        keys = self._keys(body['success'][0]['request_delete_range'])
        for k in keys:
            del self.data[k]
        return {'header': header, 'succeeded': True,
                'responses': [{'response_delete_range': dict({'header': header},
                                                             **({'deleted': str(len(keys))} if keys else {}))}]}

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def etcd():
    made = []

    def make(data):
        made.append(FakeEtcd(data))
        return made[-1]
    yield make
    for fake in made:
        fake.close()


def ha(manager, capsys, fake, **args):
    port = args.pop('port', None) or free_port()
    params = dict(enable_ha=True, rpc_address='127.0.0.1', port=port, etcd_endpoints=['127.0.0.1:%d' % fake.port],
                  cluster_id=CID, enable_oplog=True, mooncake_version='0.3.13.post1', ha_name='node1',
                  ha_peers=[dict(name='node2', rpc='127.0.0.2:%d' % port, health='http://127.0.0.2:9/health')])
    params.update(args)
    return master(manager, capsys, **params)


def deletes(fake):
    return [r for r in fake.requests if r[0] == '/v3/kv/txn']


@pytest.mark.parametrize('version, oplog', [('0.3.13.post1', True), ('', True), ('0.3.12.post1', False),
                                            ('0.3.11.post1', False), ('0.3.9', False)])
def test_the_flags_follow_the_declared_release(manager, capsys, etcd, version, oplog):
    fake = etcd({})
    res = ha(manager, capsys, fake, mooncake_version=version, check=True)
    assert ('--enable_oplog=true' in res['argv']) is oplog and res['oplog'] is oplog
    assert '--cluster_id=%s' % CID in res['argv']  # every release from 0.3.9 has --cluster_id
    assert ('oplog_namespace' in res) is oplog
    assert res['changed'] and manager.text is None  # check mode: nothing written


def test_without_ha_neither_flag_and_etcd_is_not_asked(manager, capsys, etcd):
    fake = etcd(LEGACY)
    res = master(manager, capsys, cluster_id=CID, enable_oplog=True, mooncake_version='0.3.13.post1', check=True)
    assert not [a for a in res['argv'] if 'oplog' in a or 'cluster_id' in a] and not res['oplog']
    assert fake.requests == []


def test_a_log_of_the_new_format_or_none_lets_the_master_start(manager, capsys, etcd):
    fake = etcd({'/oplog/%s/batches/00000000000000000001' % CID: 'b', '/oplog/%s/durable_prefix' % CID: '{}'})
    res = ha(manager, capsys, fake, check=True)
    assert res['oplog_namespace']['format'] == 'batch' and res['oplog_namespace']['keys'] == 2
    assert res['oplog_namespace']['cluster_id'] == CID and not deletes(fake)
    assert ha(manager, capsys, etcd({}), check=True)['oplog_namespace']['format'] == 'empty'


def test_a_legacy_namespace_is_named_and_nothing_is_deleted_or_started(manager, capsys, etcd):
    fake = etcd(dict(LEGACY, **OTHER_POOL))
    res = ha(manager, capsys, fake)
    assert res['failed']
    assert_names(res['msg'], '127.0.0.1:%d' % fake.port, '/oplog/%s/' % CID, 'older per-entry format',
                 'mooncake_master_oplog_reset_legacy: true', 'mooncake_master_oplog: false', 'Nothing was deleted')
    assert res['oplog_namespace']['format'] == 'legacy' and not deletes(fake)
    assert manager.calls == [] and manager.text is None  # refused before the unit was touched
    assert fake.data == dict(LEGACY, **OTHER_POOL)


def test_reset_in_check_mode_says_what_would_go(manager, capsys, etcd):
    fake = etcd(LEGACY)
    res = ha(manager, capsys, fake, oplog_reset_legacy=True, check=True)
    assert res['oplog_namespace']['deleted'] == 2 and not deletes(fake) and fake.data == LEGACY


def test_reset_deletes_that_namespace_only_then_starts(manager, capsys, etcd):
    fake = etcd(dict(LEGACY, **OTHER_POOL))
    res = ha(manager, capsys, fake, oplog_reset_legacy=True, ready_timeout=0.2)
    assert res['oplog_namespace']['deleted'] == 2
    assert fake.data == OTHER_POOL  # another cluster's log is never touched
    assert manager.text is not None  # the unit was written after the reset (its gate fails here: no master runs)


def test_reset_is_refused_while_a_master_leads(manager, capsys, etcd):
    port = free_port()
    fake = etcd(dict(LEGACY, **{'mooncake-store/%s/master_view' % CID: '127.0.0.2:%d' % port}))
    res = ha(manager, capsys, fake, port=port, oplog_reset_legacy=True)
    assert res['failed']
    assert_names(res['msg'], '127.0.0.2:%d' % port, 'leads', 'mooncake_master_state=stopped',
                 'mooncake_master_oplog_reset_legacy: true')
    assert not deletes(fake) and fake.data['/oplog/%s/latest' % CID] == '1' and manager.calls == []


def test_a_leader_of_another_pool_is_refused_and_nothing_is_deleted(manager, capsys, etcd):
    fake = etcd(dict(LEGACY, **{'mooncake-store/%s/master_view' % CID: '10.9.9.9:50088'}))
    res = ha(manager, capsys, fake, oplog_reset_legacy=True)
    assert res['failed']
    assert_names(res['msg'], 'mooncake-store/%s/master_view' % CID, '10.9.9.9:50088', 'kvpool_cluster_id',
                 'Nothing was deleted')
    assert not deletes(fake) and manager.calls == []


def test_etcd_not_reached_is_named(manager, capsys):
    dead = '127.0.0.1:%d' % free_port()
    res = master(manager, capsys, enable_ha=True, rpc_address='127.0.0.1', etcd_endpoints=[dead], cluster_id=CID,
                 enable_oplog=True, mooncake_version='0.3.13.post1')
    assert res['failed']
    assert_names(res['msg'], dead, '/oplog/%s/' % CID, 'kvpool_etcd')
    assert manager.calls == []


def test_a_cluster_id_that_is_no_etcd_key_part_is_refused(manager, capsys, etcd):
    res = ha(manager, capsys, etcd({}), cluster_id='my pool/1')
    assert res['failed']
    assert_names(res['msg'], 'cluster_id', 'my pool/1', 'kvpool_cluster_id')


def test_the_master_gets_the_id_in_its_environment_too(manager, capsys, etcd):
    # Mooncake 0.3.9's master builds its leader key from MC_STORE_CLUSTER_ID only (measured on the PyPI wheel)
    res = ha(manager, capsys, etcd({}), mooncake_version='0.3.9', check=True, diff=True)
    assert 'MC_STORE_CLUSTER_ID=%s' % CID in res['diff']['after']
    res = ha(manager, capsys, etcd({}), env={'MC_STORE_CLUSTER_ID': 'mooncake'})
    assert res['failed']
    assert_names(res['msg'], 'MC_STORE_CLUSTER_ID=mooncake', CID, 'kvpool_cluster_id')
    assert manager.calls == []


class FakeMasterAdmin(object):
    """The admin server of a running master (GET /health, /metrics), as 0.3.13.post1 answers them."""

    def __init__(self, role, applied):
        self.port = free_port()
        health = json.dumps({'status': 'ok', 'role': role, 'ha_state': 'standby' if role == 'standby' else 'serving',
                             'service_ready': role != 'standby', 'leader_address': '127.0.0.2:1',
                             'view_version': 10}).encode()
        metrics = ('# TYPE ha_oplog_applied_sequence_id gauge\nha_oplog_applied_sequence_id %d\n' % applied).encode()

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                body = health if self.path == '/health' else metrics
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        self.srv = ThreadingHTTPServer(('127.0.0.1', self.port), H)
        threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.mark.parametrize('role, applied, data, restarted', [
    ('standby', 283, {}, True),                                                  # etcd lost the log it applied
    ('standby', 0, {}, False),                                                   # a fresh standby: nothing applied
    ('standby', 283, {'/oplog/%s/durable_prefix' % CID: '{}'}, False),           # the log is there
    ('leader', 283, {}, False),                                                  # a serving leader is left alone
])
def test_a_standby_whose_log_etcd_lost_is_restarted(manager, capsys, etcd, role, applied, data, restarted):
    admin = FakeMasterAdmin(role, applied)
    try:
        res = ha(manager, capsys, etcd(data), metrics_port=admin.port, check=True)
    finally:
        admin.close()
    assert ('oplog_restart' in res) is restarted, res
    if restarted:
        assert_names(res['oplog_restart'], '283', CID, 'INCOMPLETE_OPLOG_CATCH_UP', 'restarted')
        assert res['changed'] and res['action'] in ('started', 'restarted')  # no unit yet in the fake manager
