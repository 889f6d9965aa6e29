# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Garbage from a peer (issue 32): every parser of a peer's JSON (etcd's answers, the router's /workers, vLLM's
/v1/models and stream chunks, the master's /health) returns its documented shape or raises ValueError with a
message, never another exception (Hypothesis, over answers shaped like the real ones with any value at any leaf);
a NaN or infinite number never reaches a JSON file the collection writes (mooncake.json, the controller's reports);
and mooncake_config_file, given an etcd whose range answer is garbage, fails naming it (a fake etcd on loopback)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible.module_utils.testing import patch_module_args
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _etcd, _loadgen, _mooncake, _router, _vllm
from ansible_collections.ascend.kvpool.plugins.modules import mooncake_config_file
from ansible_collections.ascend.kvpool.plugins.plugin_utils import report_files
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

# Any JSON value, NaN and infinity included (Python's json reads them, as a peer may send them).
LEAF = st.none() | st.booleans() | st.integers(min_value=-2 ** 70, max_value=2 ** 70) | st.floats() | \
    st.text(max_size=8) | st.sampled_from(['2379', 'http://a:1', '', 'abc', '0'])
ANY = st.recursive(
    LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10)


def shaped(keys):
    """An object with the keys of a real answer (each maybe missing), any value at each."""
    return st.fixed_dictionaries({}, optional=dict((k, ANY) for k in keys))


MEMBER = shaped(['ID', 'name', 'peerURLs', 'clientURLs'])
MEMBER_LIST = st.fixed_dictionaries({}, optional={'header': ANY, 'members': st.lists(MEMBER | ANY, max_size=3) | ANY})
STATUS = st.fixed_dictionaries({}, optional={'Endpoint': ANY, 'Status': shaped(['header', 'leader', 'version']) | ANY})
HEALTH = shaped(['endpoint', 'health', 'error'])
RANGE = st.fixed_dictionaries(
    {'header': ANY}, optional={'kvs': st.lists(shaped(['key', 'value']) | ANY, max_size=2) | ANY})


def _text(value):
    return json.dumps(value)


@settings(max_examples=150, deadline=None)
@given(st.one_of(MEMBER_LIST, ANY).map(_text))
@example('{"members": [{"ID": [1]}]}')
@example('{"members": [{"ID": 1e999, "peerURLs": 5}]}')
def test_member_list_and_member_add_give_members_or_a_message(text):
    for parse in (_etcd.parse_member_list, _etcd.parse_member_add):
        try:
            members = parse(text)
        except ValueError as exc:
            assert str(exc)
            continue
        for m in members:
            assert isinstance(m['id'], str) and isinstance(m['name'], str)
            assert all(isinstance(u, str) for u in m['peer_urls'] + m['client_urls'])


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.lists(STATUS | ANY, max_size=3), ANY).map(_text))
@example('[{"Status": {"header": 3}}]')
@example('[{"Status": {"header": {"member_id": "x"}, "leader": [2]}}]')
def test_endpoint_status_gives_ids_or_a_message(text):
    try:
        out = _etcd.parse_endpoint_status(text)
    except ValueError as exc:
        assert str(exc)
        return
    assert all(isinstance(s['member_id'], str) and isinstance(s['leader'], str) for s in out)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.lists(HEALTH | ANY, max_size=3), ANY).map(_text))
def test_endpoint_health_gives_entries_or_a_message(text):
    try:
        out = _etcd.parse_endpoint_health(text)
    except ValueError as exc:
        assert str(exc)
        return
    assert all(isinstance(h['health'], bool) for h in out)


@settings(max_examples=150, deadline=None)
@given(st.one_of(RANGE, ANY).map(_text))
@example('{"header": {}, "kvs": {"0": {"value": "eA=="}}}')  # the issue's: kvs an object was KeyError: 0
@example('{"header": {}, "kvs": "abc"}')
@example('{"header": {}, "kvs": [{"value": 5}]}')
def test_a_range_answer_gives_the_value_or_a_message(text):
    try:
        value = _etcd.parse_range_value(text)
    except ValueError as exc:
        assert str(exc).startswith('kv range')
        return
    assert isinstance(value, str)


def test_a_range_answer_whose_kvs_is_an_object_is_named():
    with pytest.raises(ValueError) as err:
        _etcd.parse_range_value('{"header": {}, "kvs": {"0": 1}}')
    assert_names(str(err.value), 'kv range', 'kvs', 'not a list')


@settings(max_examples=150, deadline=None)
@given(st.one_of(shaped(['workers', 'total']), st.lists(ANY, max_size=3), ANY).map(_text) | st.none())
def test_router_workers_give_urls_or_a_message(text):
    try:
        out = _router.parse_workers(text)
    except ValueError:
        return
    assert all(isinstance(w['url'], str) and isinstance(w['healthy'], bool) for w in out)


@settings(max_examples=150, deadline=None)
@given(st.one_of(
    st.fixed_dictionaries({}, optional={'data': st.lists(shaped(['id', 'object']) | ANY, max_size=3) | ANY}),
    ANY).map(_text) | st.text(max_size=30) | st.none())
def test_served_models_and_master_health_never_raise(text):
    assert all(isinstance(m, str) for m in _vllm.parse_models(text))
    view = _mooncake.parse_ha_health(text)
    assert view is None or (isinstance(view['ha_state'], str) and isinstance(view['service_ready'], bool))


@settings(max_examples=150, deadline=None)
@given(st.fixed_dictionaries({}, optional={'choices': st.lists(shaped(['delta', 'text']) | ANY, max_size=2) | ANY,
                                           'usage': shaped(['completion_tokens', 'prompt_tokens']) | ANY}))
@example({'choices': {'0': 'x'}, 'usage': {'completion_tokens': float('nan')}})
def test_a_stream_chunk_gives_text_and_counts_or_nothing(chunk):
    for api in ('chat', 'completions'):
        assert isinstance(_loadgen._chunk_text(chunk, api), str)  # pylint: disable=protected-access
    completion, prompt = _loadgen.usage_tokens(chunk.get('usage'))
    for count in (completion, prompt):
        assert count is None or (isinstance(count, int) and count >= 0)


# --- NaN and infinity never reach a JSON file ---------------------------------------------------------------------
def _strict(text):
    def refuse(name):
        raise AssertionError('%s in the JSON: %s' % (name, text[:200]))
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize('value', [float('nan'), float('inf'), float('-inf')])
def test_mooncake_json_never_holds_nan_or_infinity(capsys, tmp_path, value):
    with pytest.raises(ValueError):
        _mooncake.config_text({'global_segment_size': value})
    path = tmp_path / 'mooncake.json'
    config = {'protocol': 'tcp', 'sizes': [1, {'local_buffer_size': value}]}
    with patch_module_args({'path': str(path), 'config': config}):
        with pytest.raises(SystemExit):
            mooncake_config_file.main()
    res = json.loads(capsys.readouterr().out)
    assert res.get('failed'), res
    assert_names(res['msg'], 'config.sizes[1].local_buffer_size', 'not a finite number', 'was not written')
    assert not path.exists()


def test_a_report_writes_nan_and_infinity_as_null(tmp_path):
    report = {'ttft_ms': float('nan'), 'rows': [{'hit': float('inf')}, (1.5, float('-inf'))], 'ok': True}
    path = report_files.write_json_report(str(tmp_path / 'r.json'), report)
    assert _strict(open(path).read()) == {'ttft_ms': None, 'rows': [{'hit': None}, [1.5, None]], 'ok': True,
                                          'written_by': 'ascend.kvpool.report'}


# --- mooncake_config_file against a fake etcd that answers garbage ------------------------------------------------
class FakeEtcd(object):
    """SIMULATED etcd on 127.0.0.1: /health healthy, /v3/kv/range answers ``range_body``."""

    def __init__(self, range_body):
        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get('Content-Length') or 0)
                if length:
                    self.rfile.read(length)
                body = b'{"health":"true"}' if self.path == '/health' else range_body
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                self._answer()

            def do_POST(self):  # noqa: N802
                self._answer()

            def log_message(self, *args):
                pass
        self.srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.endpoint = '127.0.0.1:%d' % self.srv.server_address[1]
        thread = threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05})
        thread.daemon = True
        thread.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.mark.parametrize('body, names', [
    (b'{"header": {}, "kvs": {"0": {"value": "eA=="}}}', ['kvs', 'not a list']),
    (b'{"header": {}, "kvs": [{"value": 7}]}', ['value is 7']),
    (b'{"header": {}, "kvs": [{"value": "%%%"}]}', ['not base64']),
    (b'[1, 2]', ['not an etcd answer']),
])
def test_mooncake_config_file_names_an_etcd_answer_that_is_garbage(capsys, tmp_path, body, names):
    etcd = FakeEtcd(body)
    path = tmp_path / 'mooncake.json'
    try:
        with patch_module_args({'path': str(path), 'config': {'protocol': 'tcp'}, 'connect_timeout': 2,
                                'master': 'etcd://%s' % etcd.endpoint}):
            with pytest.raises(SystemExit):
                mooncake_config_file.main()
    finally:
        etcd.close()
    res = json.loads(capsys.readouterr().out)
    assert res.get('failed') and 'Traceback' not in res['msg'] and 'exception' not in res, res
    assert_names(res['msg'], etcd.endpoint, 'mooncake-store/mooncake_cluster/master_view', 'was not written', *names)
    assert not path.exists()
