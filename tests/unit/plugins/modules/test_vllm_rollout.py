# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm_rollout on localhost against small HTTP servers of this test (SIMULATED: a router answering as vllm-router
0.1.17 does - /workers, /add_worker?url=, /remove_worker?url= - and instances answering /metrics and streaming chat
as vLLM does): the drain removes and waits, puts the workers back when it runs out of time and names the instance
and its figure; the restore adds, waits for the router and for the peers' TTFT; check mode changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from ansible_collections.ascend.kvpool.plugins.modules import vllm_rollout
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import Server
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.service_harness import run


class Instance(object):
    """A vLLM instance: ``busy`` lists the requests in flight at each successive /metrics poll (the last one
    stays); ``delay`` seconds before the first token."""

    def __init__(self, busy=(0,), delay=0.0):
        self.busy = list(busy)
        self.delay = delay
        self.chats = 0
        self.srv = Server(self.handle)
        self.url = self.srv.url

    def handle(self, method, path, body):
        if path == '/metrics':
            running = self.busy.pop(0) if len(self.busy) > 1 else self.busy[0]
            return 200, ('vllm:num_requests_running{engine="0",model_name="qwen"} %s\n'
                         'vllm:num_requests_waiting{engine="0",model_name="qwen"} 0.0\n' % float(running)).encode()
        if path == '/v1/chat/completions' and method == 'POST':
            self.chats += 1
            assert json.loads(body)['model'] == 'qwen'
            time.sleep(self.delay)
            chunk = {'choices': [{'delta': {'content': 'ok'}}]}
            return 200, ('data: %s\n\ndata: [DONE]\n\n' % json.dumps(chunk)).encode()
        return 404, {'detail': 'Not Found'}


class Router(object):
    def __init__(self, urls):
        self.listed = dict((u, True) for u in urls)
        self.calls = []
        self.srv = Server(self.handle)
        self.url = self.srv.url

    def handle(self, method, path, body):
        parts = urlsplit(path)
        if parts.path in ('/add_worker', '/remove_worker') and method == 'POST':
            url = parse_qs(parts.query)['url'][0]
            self.calls.append((parts.path, url))
            if parts.path == '/add_worker':
                self.listed[url] = True
            else:
                self.listed.pop(url, None)
            return 200, b'ok'
        if parts.path == '/workers':
            return 200, {'workers': [{'url': u, 'is_healthy': h} for u, h in self.listed.items()]}
        if parts.path == '/v1/chat/completions':
            return 200, {'choices': [{'message': {'content': 'ok'}}]}
        return 404, b''


@pytest.fixture
def cluster():
    made = {'a': Instance(), 'b': Instance(busy=(2, 1, 0))}
    made['router'] = Router([made['a'].url, made['b'].url])
    yield made
    for item in made.values():
        item.srv.close()


def rollout(capsys, **args):
    params = dict(poll_interval=0.02, request_timeout=5, model='qwen')
    params.update(args)
    return run(vllm_rollout, capsys, **params)


def test_drain_removes_then_waits_until_nothing_is_in_flight(capsys, cluster):
    a, b, router = cluster['a'], cluster['b'], cluster['router']
    res = rollout(capsys, action='drain', router_url=router.url, instances=[b.url], timeout=5)
    assert not res.get('failed'), res.get('msg')
    assert res['changed'] and res['removed'] == [b.url]
    assert router.calls == [('/remove_worker', b.url)] and list(router.listed) == [a.url]
    assert res['in_flight'] == {b.url: {'running': 0, 'waiting': 0}} and res['drain_seconds'] >= 0
    again = rollout(capsys, action='drain', router_url=router.url, instances=[b.url], timeout=5)
    assert not again['changed'] and again['removed'] == [] and len(router.calls) == 1


def test_a_drain_out_of_time_puts_the_workers_back_and_names_the_figure(capsys, cluster):
    b, router = cluster['b'], cluster['router']
    b.busy = [3]
    res = rollout(capsys, action='drain', router_url=router.url, instances=[b.url], timeout=0.2)
    assert res['failed']
    assert_names(res['msg'], b.url, 'did not drain within 0.2 s', '3 running, 0 waiting', 'back in the router',
                 'kvpool_upgrade_drain_timeout')
    assert router.calls == [('/remove_worker', b.url), ('/add_worker', b.url)] and router.listed[b.url]


def test_a_drain_that_would_leave_the_router_without_a_healthy_worker_is_refused(capsys, cluster):
    a, b, router = cluster['a'], cluster['b'], cluster['router']
    router.listed[a.url] = False  # the other worker is unhealthy (or was left out by a failed batch)
    res = rollout(capsys, action='drain', router_url=router.url, instances=[b.url], timeout=5)
    assert res['failed']
    assert_names(res['msg'], b.url, 'no healthy worker', a.url + ' (unhealthy)', 'Nothing was changed',
                 'kvpool_upgrade_allow_outage=true')
    assert router.calls == []
    res = rollout(capsys, action='drain', router_url=router.url, instances=[b.url], timeout=5, allow_no_worker=True)
    assert not res.get('failed'), res.get('msg')
    assert router.calls == [('/remove_worker', b.url)]


def test_check_mode_changes_nothing_and_says_what_it_would_do(capsys, cluster):
    b, router = cluster['b'], cluster['router']
    res = run(vllm_rollout, capsys, check=True, action='drain', router_url=router.url, instances=[b.url])
    assert not res.get('failed'), res.get('msg')
    assert res['changed'] and router.calls == [] and res['in_flight'] == {b.url: {'running': 2, 'waiting': 0}}
    assert res['plan'][0] == 'remove %s from the router %s' % (b.url, router.url)
    router.listed.pop(b.url)
    res = run(vllm_rollout, capsys, check=True, action='restore', router_url=router.url, instances=[b.url],
              peers=[cluster['a'].url], model='qwen')
    assert res['changed'] and res['added'] == [b.url] and router.calls == [] and 'recovery' not in res
    res = run(vllm_rollout, capsys, check=True, action='baseline', peers=[b.url], model='qwen')
    assert 'baseline' not in res and b.chats == 0


def test_drain_without_a_router_only_waits_and_warns(capsys, cluster):
    res = rollout(capsys, action='drain', instances=[cluster['b'].url], timeout=5)
    assert not res.get('failed'), res.get('msg')
    assert_names(res['warning'], 'no router', 'will fail')
    assert not res['changed']


def test_baseline_then_restore_with_recovery(capsys, cluster):
    a, b, router = cluster['a'], cluster['b'], cluster['router']
    base = rollout(capsys, action='baseline', peers=[a.url, 'http://127.0.0.1:9'], samples=3)
    assert not base.get('failed'), base.get('msg')
    assert list(base['baseline']) == [a.url] and base['baseline'][a.url] < 1.0
    assert a.chats == 3 and 'http://127.0.0.1:9' in base['errors']
    router.listed.pop(b.url)
    res = rollout(capsys, action='restore', router_url=router.url, instances=[b.url], peers=[a.url],
                  baseline=base['baseline'], samples=3, timeout=5)
    assert not res.get('failed'), res.get('msg')
    assert res['changed'] and res['added'] == [b.url] and router.listed[b.url] and res['router_request'] == 200
    fig = res['recovery'][a.url]
    assert fig['ok'] and fig['bound'] == pytest.approx(base['baseline'][a.url] + 0.5, abs=1e-3)
    assert res['recovery_seconds'] >= 0


def test_a_peer_that_does_not_recover_stops_the_rollout_naming_it(capsys, cluster):
    a, b, router = cluster['a'], cluster['b'], cluster['router']
    a.delay = 0.3
    res = rollout(capsys, action='restore', router_url=router.url, instances=[b.url], peers=[a.url],
                  baseline={a.url: 0.01}, samples=1, ttft_slack=0.05, timeout=0.5)
    assert res['failed']
    assert_names(res['msg'], a.url, 'TTFT p50 0.3', 'bound 0.060 s', 'baseline 0.010 s', 'did not recover',
                 'kvpool_upgrade_recovery_timeout')
    assert not res['recovery'][a.url]['ok']


def test_restore_fails_when_the_router_does_not_list_the_instance_healthy(capsys, cluster):
    b, router = cluster['b'], cluster['router']
    router.listed[b.url] = False
    res = rollout(capsys, action='restore', router_url=router.url, instances=[b.url], timeout=0.2)
    assert res['failed']
    assert_names(res['msg'], b.url, 'healthy', 'does not serve through the router')


@pytest.mark.parametrize('args, needle', [
    (dict(action='drain', timeout=0), 'timeout=0.0 must be a finite number above 0'),
    (dict(action='drain', instances=['ftp://x']), 'instances[0]'),
    (dict(action='restore', ttft_factor=0.5), 'ttft_factor'),
    (dict(action='baseline', samples=0), 'samples=0'),
    (dict(action='restore', baseline={'http://a:1': 'fast'}), 'is not a number of seconds'),
    (dict(action='restore', peers=['http://a:1'], model=None), 'needs model'),
])
def test_bad_input_is_named(capsys, args, needle):
    res = rollout(capsys, **args)
    assert res['failed'] and needle in res['msg'], res['msg']
