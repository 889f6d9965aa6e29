# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm_router and vllm_router_check on localhost, over the in-memory service manager of service_harness.py:
bad input fails before a unit is written, the gate needs every worker listed healthy AND answering itself, the
render probe and the spread verdict. The router and the workers here are small HTTP servers of this test
(SIMULATED: they answer as vllm-router 0.1.17 and vLLM do in the recorded fixtures, fixtures/router/)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.modules import vllm_router, vllm_router_check
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules import service_harness as svc
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import Server, free_port

run = svc.run


def worker(render=200, tokenize=200):
    def handler(method, path, body):
        if path == '/health':
            return 200, b''
        if path == '/v1/chat/completions/render':
            return render, {'token_ids': [1, 2]} if render == 200 else {'detail': 'Not Found'}
        if path == '/tokenize':
            return tokenize, {'count': 2, 'tokens': [1, 2], 'max_model_len': 8192}
        return 404, {'detail': 'Not Found'}
    return Server(handler)


@pytest.fixture
def manager(monkeypatch, tmp_path):
    return svc.manager_behind(monkeypatch, tmp_path, (vllm_router,), 'vllm-router')


@pytest.fixture
def workers():
    made = [worker(), worker(render=404)]
    yield made
    for w in made:
        w.close()


def fake_router(manager, port, listed, counts=None):
    """Starts, once the manager starts the unit, a router answering /health and /workers with ``listed``
    (url -> healthy), /metrics with ``counts`` and sending chat requests to the first worker."""
    state = {'srv': None, 'counts': counts if counts is not None else {}}

    def handler(method, path, body):
        if path == '/health':
            return (200 if all(listed.values()) else 503), b'All servers healthy'
        if path == '/workers':
            return 200, {'workers': [{'url': u, 'is_healthy': h} for u, h in listed.items()], 'total': len(listed)}
        if path == '/metrics':
            return 200, ''.join('vllm_router_processed_requests_total{worker="%s"} %d\n' % (u, n)
                                for u, n in state['counts'].items()).encode()
        if path == '/v1/chat/completions':
            first = sorted(listed)[0]
            state['counts'][first] = state['counts'].get(first, 0) + 1
            return 200, {'choices': []}
        return 404, b''

    def start():
        if state['srv'] is None:
            state['srv'] = Server(handler, port)
    manager.on_start = start
    return state


def router(manager, capsys, **args):
    params = dict(binary=str(manager.tmp / 'vllm-router'), port=free_port(), prometheus_port=free_port(),
                  ready_timeout=1, poll_interval=0.02)
    params.update(args)
    return run(vllm_router, capsys, **params)


@pytest.mark.parametrize('args, needle', [
    (dict(worker_urls=[]), 'worker_urls is empty'),
    (dict(worker_urls=['ftp://x']), 'worker_urls[0]'),
    (dict(worker_urls=['http://a:1'], extra_args=['--api-key', 'k']), 'extra_args: --api-key sets --api-key'),
    (dict(worker_urls=['http://a:1'], extra_args=['--pol=random']), 'sets --policy'),
    (dict(worker_urls=['http://a:1'], port=9100, prometheus_port=9100), 'different ports'),
    (dict(worker_urls=['http://a:1'], health_check_interval=0), 'health_check_interval'),
    (dict(worker_urls=['http://a:1'], cache_threshold=1.5), 'cache_threshold'),
    (dict(worker_urls=['http://a:1'], binary='/nonexistent/vllm-router'), 'vllm-router not found at /nonexistent'),
])
def test_bad_input_fails_before_any_unit(manager, capsys, args, needle):
    res = router(manager, capsys, **args)
    assert res['failed'] and needle in res['msg'], res['msg']
    assert manager.calls == [] and manager.text is None


def test_start_gate_and_no_change_on_the_second_run(manager, capsys, workers):
    port = free_port()
    urls = [w.url for w in workers]
    state = fake_router(manager, port, dict((u, True) for u in urls))
    try:
        metrics = free_port()
        res = router(manager, capsys, port=port, prometheus_port=metrics, worker_urls=list(reversed(urls)))
        assert not res.get('failed'), res.get('msg')
        assert res['changed'] and res['health'] == 'healthy' and res['workers'] == sorted(urls)
        assert res['argv'][-3:] == ['--worker-urls'] + sorted(urls)
        again = router(manager, capsys, port=port, prometheus_port=metrics, worker_urls=urls)
        assert not again['changed'] and again['action'] == 'none', (again['action'], again['reason'])
    finally:
        state['srv'].close()


def test_gate_names_a_worker_the_router_calls_healthy_but_that_does_not_answer(manager, capsys, workers):
    port = free_port()
    dead = 'http://127.0.0.1:%d' % free_port()
    state = fake_router(manager, port, {workers[0].url: True, dead: True})
    try:
        res = router(manager, capsys, port=port, worker_urls=[workers[0].url, dead])
        assert res['failed']
        assert_names(res['msg'], 'no 200 from GET /health', dead, 'from the router host')
    finally:
        state['srv'].close()


def test_gate_names_an_unhealthy_and_a_missing_worker(manager, capsys, workers):
    port = free_port()
    state = fake_router(manager, port, {workers[0].url: False})
    try:
        res = router(manager, capsys, port=port, worker_urls=[w.url for w in workers])
        assert res['failed']
        assert 'unhealthy: %s' % workers[0].url in res['msg'] or 'GET /health -> 200' in res['msg']
    finally:
        state['srv'].close()


def test_render_probe_and_spread_verdict(capsys, workers):
    res = run(vllm_router_check, capsys, workers=[w.url for w in workers], render=True)
    assert res['render'] == {workers[0].url: 200, workers[1].url: 404}
    assert res['tokenize'] == {workers[1].url: 200}  # asked only where render is absent
    port = free_port()
    mgr = svc.Manager()
    state = fake_router(mgr, port, dict((w.url, True) for w in workers))
    mgr.on_start()
    try:
        base = 'http://127.0.0.1:%d' % port
        res = run(vllm_router_check, capsys, workers=[w.url for w in workers], router_url=base,
                  metrics_url=base + '/metrics', policy='round_robin', spread_requests=4)
        assert res['failed']
        assert_names(res['msg'], 'all 4 requests', 'distinct prefixes',
                     'went to %s' % sorted(w.url for w in workers)[0])
        res = run(vllm_router_check, capsys, check=True, workers=[w.url for w in workers], router_url=base,
                  metrics_url=base + '/metrics', spread_requests=4)
        assert not res.get('failed') and res['skipped_spread'].startswith('check mode')
        res = run(vllm_router_check, capsys, workers=[w.url for w in workers], router_url=base,
                  metrics_url=base + '/metrics', policy='sticky_least_loaded', spread_requests=4)
        assert not res.get('failed') and sum(res['counts'].values()) == 4
    finally:
        state['srv'].close()


def test_spread_prompts_differ_in_first_word_and_length():
    import random
    prompts = vllm_router_check.spread_prompts(6, random.Random(1))
    assert len(set(p.split()[0] for p in prompts)) == 6
    assert len(set(len(p.split()) for p in prompts)) == 6
