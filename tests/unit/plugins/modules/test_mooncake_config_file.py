# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ascend.kvpool.mooncake_config_file: the write of mooncake.json as an operator sees it (the file, its mode, the
changed flag, check mode and diff), the same bytes as the earlier template, and bad input named."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import socket
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible.plugins.filter.core import to_nice_json
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils._mooncake import config_text
from ansible_collections.ascend.kvpool.plugins.modules import mooncake_config_file
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

DOC = {'metadata_server': 'P2PHANDSHAKE', 'protocol': 'ascend', 'device_name': '',
       'master_server_address': '90.90.100.188:50088', 'global_segment_size': 107374182400,
       'local_buffer_size': 1073741824, 'local_hostname': '90.90.100.189'}


def run(capsys, check_mode=False, diff=False, **params):
    params = dict(params, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            mooncake_config_file.main()
    return json.loads(capsys.readouterr().out)


def test_writes_the_file_and_its_directory_then_changes_nothing(capsys, tmp_path):
    path = tmp_path / 'etc' / 'ascend-kvpool' / 'mooncake.json'
    first = run(capsys, path=str(path), config=DOC)
    assert first['changed'] and not first.get('failed'), first
    assert json.loads(path.read_text()) == DOC
    assert list(json.loads(path.read_text())) == list(DOC)  # the document's key order
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    again = run(capsys, path=str(path), config=DOC)
    assert again['changed'] is False and again['text'] == path.read_text()
    # no temporary file left; the record beside it proves the module wrote it
    assert sorted(os.listdir(str(path.parent))) == ['.mooncake.json.kvpool', 'mooncake.json']


def test_the_text_is_the_earlier_templates_bytes(tmp_path):
    # the role wrote it with a template (removed) of "{{ doc | to_nice_json(indent=4, sort_keys=false) }}" and a newline
    assert config_text(DOC) == to_nice_json(DOC, indent=4, sort_keys=False) + '\n'


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3),
                           max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), JSON_VALUES, max_size=8))
def test_config_text_is_json_of_the_document_with_one_final_newline(doc):
    text = config_text(doc)
    assert text.endswith('}\n') and not text.endswith('\n\n')
    assert json.loads(text) == doc
    assert text == to_nice_json(doc, indent=4, sort_keys=False) + '\n'


def test_a_changed_value_or_mode_is_written_and_diffed(capsys, tmp_path):
    path = tmp_path / 'mooncake.json'
    run(capsys, path=str(path), config=DOC)
    changed = run(capsys, diff=True, path=str(path), config=dict(DOC, protocol='tcp'))
    assert changed['changed'] and '"protocol": "ascend"' in changed['diff']['before']
    assert '"protocol": "tcp"' in changed['diff']['after'] and json.loads(path.read_text())['protocol'] == 'tcp'
    path.chmod(0o600)
    assert run(capsys, path=str(path), config=dict(DOC, protocol='tcp'))['changed']
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_check_mode_reports_the_change_and_writes_nothing(capsys, tmp_path):
    path = tmp_path / 'new' / 'mooncake.json'
    res = run(capsys, check_mode=True, diff=True, path=str(path), config=DOC)
    assert res['changed'] and res['diff']['before'] == '' and json.loads(res['diff']['after']) == DOC
    assert not path.parent.exists()


def test_the_proof_is_reported_and_never_written(capsys, tmp_path):
    path, proof = tmp_path / 'mooncake.json', tmp_path / 'mooncake.json.proven'
    assert run(capsys, path=str(path), config=DOC, proof=str(proof))['proof_exists'] is False
    assert not proof.exists()
    proof.write_text('pool proven\n')
    assert run(capsys, path=str(path), config=DOC, proof=str(proof))['proof_exists'] is True
    assert run(capsys, path=str(path), config=DOC)['proof_exists'] is False  # no proof asked for


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize('check_mode', [False, True])
def test_a_master_the_node_cannot_reach_fails_naming_it_before_anything_is_written(capsys, tmp_path, check_mode):
    path, port = tmp_path / 'kvpool' / 'mooncake.json', _free_port()
    res = run(capsys, check_mode=check_mode, path=str(path), config=DOC, master='127.0.0.1:%d' % port,
              connect_timeout=1.0)
    assert res['failed'], res
    assert_names(res['msg'], 'cannot reach', 'Mooncake master', '127.0.0.1:%d' % port)
    assert 'Connection refused' in res['msg'] and 'mooncake.json was not written' in res['msg']
    assert_names(res['msg'], 'check that mooncake_master', 'runs on 127.0.0.1', 'port %d.' % port)
    assert not path.parent.exists()                                  # not even the directory


def test_a_master_that_answers_is_reported_and_the_file_written(capsys, tmp_path):
    with socket.socket() as server:
        server.bind(('127.0.0.1', 0))
        server.listen(1)
        target = '127.0.0.1:%d' % server.getsockname()[1]
        res = run(capsys, path=str(tmp_path / 'mooncake.json'), config=DOC, master=target)
    assert res['changed'] and res['master_connect']['ok'] is True and res['master_connect']['error'] == ''
    assert json.loads((tmp_path / 'mooncake.json').read_text()) == DOC
    assert run(capsys, path=str(tmp_path / 'mooncake.json'), config=DOC)['master_connect'] == {}  # none asked for


@pytest.mark.parametrize('params, needle', [
    ({'master': '90.90.100.188'}, "master is '90.90.100.188', which is not host:port"),
    ({'master': 'h:70000'}, "master is 'h:70000', which is not host:port"),
    ({'master': '127.0.0.1:50088', 'connect_timeout': 0}, 'connect_timeout is 0.0: give a number of seconds above 0'),
    ({'master': '127.0.0.1:50088', 'connect_timeout': 61}, 'connect_timeout is 61.0: give a number of seconds above'),
    ({'path': 'mooncake.json'}, "path is 'mooncake.json', which is not an absolute path"),
    ({'mode': '0999'}, 'mode is \'0999\', which is not an octal file mode'),
    ({'directory_mode': 'rwx'}, "directory_mode is 'rwx', which is not an octal file mode"),
])
def test_bad_options_are_named(capsys, tmp_path, params, needle):
    res = run(capsys, **dict({'path': str(tmp_path / 'mooncake.json'), 'config': DOC}, **params))
    assert res['failed'] and needle in res['msg'], res
    assert not (tmp_path / 'mooncake.json').exists()


def test_a_directory_at_the_path_or_a_file_above_it_is_named(capsys, tmp_path):
    (tmp_path / 'mooncake.json').mkdir()
    res = run(capsys, path=str(tmp_path / 'mooncake.json'), config=DOC)
    assert res['failed']
    assert_names(res['msg'], 'is a directory', 'give the path', 'mooncake.json')
    (tmp_path / 'afile').write_text('x')
    res = run(capsys, path=str(tmp_path / 'afile' / 'mooncake.json'), config=DOC)
    assert res['failed'], res
    assert_names(res['msg'], 'afile is a file', 'not a directory', 'remove it or choose another')
    assert (tmp_path / 'afile').read_text() == 'x'


class LeaderEtcd(object):
    """SIMULATED etcd on 127.0.0.1 (its HTTP gateway): /health healthy; /v3/kv/range answers ``leader`` for the key
    ``key`` only, no key for any other (as etcd does), and records the keys read."""

    def __init__(self, key, leader):
        reads = self.reads = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self._answer(b'{"health":"true"}')

            def do_POST(self):  # noqa: N802
                asked = base64.b64decode(json.loads(self.rfile.read(int(self.headers['Content-Length'])))['key'])
                reads.append(asked.decode('utf-8'))
                kvs = [{'key': base64.b64encode(asked).decode('ascii'),
                        'value': base64.b64encode(leader.encode('utf-8')).decode('ascii')}] if asked == key.encode(
                    'utf-8') else []
                self._answer(json.dumps({'header': {}, 'kvs': kvs} if kvs else {'header': {}}).encode('utf-8'))

            def _answer(self, body):
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        self.srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.address = 'etcd://127.0.0.1:%d' % self.srv.server_address[1]
        thread = threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05})
        thread.daemon = True
        thread.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def ha_pool():
    """A leader listening on loopback, named by a SIMULATED etcd under the pool's cluster id kvpool-0123456789."""
    with socket.socket() as leader:
        leader.bind(('127.0.0.1', 0))
        leader.listen(4)
        etcd = LeaderEtcd('mooncake-store/kvpool-0123456789/master_view', '127.0.0.1:%d' % leader.getsockname()[1])
        try:
            yield etcd
        finally:
            etcd.close()


def test_ha_masters_are_found_under_the_pools_cluster_id(capsys, tmp_path, ha_pool):
    path = tmp_path / 'mooncake.json'
    res = run(capsys, path=str(path), config=DOC, master=ha_pool.address, cluster_id='kvpool-0123456789',
              connect_timeout=2.0)
    assert res['changed'] and not res.get('failed'), res
    assert ha_pool.reads == ['mooncake-store/kvpool-0123456789/master_view']
    assert res['master_connect']['ok'] and res['master_connect']['leader_key'] == ha_pool.reads[0]
    assert json.loads(path.read_text()) == DOC


@pytest.mark.parametrize('cluster_id, key', [
    ('', 'mooncake-store/mooncake_cluster/master_view'),       # none given: Mooncake's default
    ('kvpool-other', 'mooncake-store/kvpool-other/master_view'),
])
def test_a_leader_key_of_another_cluster_id_is_named_with_the_fix(capsys, tmp_path, ha_pool, cluster_id, key):
    path = tmp_path / 'mooncake.json'
    res = run(capsys, path=str(path), config=DOC, master=ha_pool.address, cluster_id=cluster_id, connect_timeout=2.0)
    assert res['failed'] and ha_pool.reads == [key], res
    assert_names(res['msg'], 'no Mooncake master is leader', key, 'is empty', 'was not written',
                 '--cluster_id=%s' % key.split('/', 2)[1], 'kvpool_cluster_id', 'mooncake_config_cluster_id')
    assert not path.exists()
