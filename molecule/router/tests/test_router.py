"""vllm-router in front of the instances (docs/router.md), on the SIMULATED two-node cluster: the instances are vllm
stand-ins (their render endpoint served as vLLM 0.22 serves it), the router is the REAL vllm-router 0.1.17.

Each drill prints its figures: a killed router comes back by itself; a worker that stops is left out while requests
through the router keep succeeding, and is taken back once it is healthy again.
"""

import json
import random
import sys
import threading
import time
from pathlib import Path

import instances_lib as lib

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as testlib  # noqa: E402

VARS = lib.SCENARIO.parent / 'router' / 'vars' / 'router.yml'
ROUTER = 'http://172.31.250.11:30000'
WORKERS = ['http://172.31.250.11:8002', 'http://172.31.250.12:8002']


def site(*args, **kw):
    return lib.playbook('site.yml', *args, var_files=(lib.SIM_VARS, VARS), **kw)


def workers():
    status, body = lib.http(ROUTER + '/workers', timeout=2)
    if status != 200:
        return {}
    return dict((w['url'], w['is_healthy']) for w in json.loads(body)['workers'])


def chat(prompt, max_tokens=4):
    return lib.http(ROUTER + '/v1/chat/completions', {'model': 'qwen', 'max_tokens': max_tokens,
                                                      'messages': [{'role': 'user', 'content': prompt}]})


def test_one_endpoint_lists_every_instance_and_serves():
    assert workers() == dict((u, True) for u in WORKERS)
    status, body = chat('hello through the router')
    assert status == 200, body
    assert json.loads(body)['usage']['prompt_tokens'] > 0
    # The router's own health says every worker is healthy.
    assert lib.http(ROUTER + '/health')[0] == 200


def test_refused_policies_name_the_reason_and_change_nothing():
    before = lib.sh(lib.NODES['node1'], 'md5sum /etc/systemd/system/kvpool-router.service')[1]
    run = site('--tags', 'router', extra_vars={'kvpool_router_policy': 'kv_aware'})
    assert run.rc != 0
    testlib.assert_names(run.stdout, 'kvpool_router_policy=kv_aware', 'refused', 'credited 0 tokens')
    run = site('--tags', 'router', extra_vars={'kvpool_router_extra_args': ['--api-key', 'x']})
    assert run.rc != 0, run.stdout[-3000:]
    testlib.assert_names(' '.join(run.stdout.split()), 'extra_args: --api-key sets --api-key', 'use the module option')
    assert lib.sh(lib.NODES['node1'], 'md5sum /etc/systemd/system/kvpool-router.service')[1] == before


def test_a_killed_router_is_restarted_by_its_unit():
    rc, out = lib.sh(lib.NODES['node1'], 'systemctl kill -s KILL kvpool-router')
    assert rc == 0, out
    killed = time.monotonic()
    down = lib.wait_for(lambda: lib.http(ROUTER + '/health', timeout=1)[0] != 200, 5, 0.02)
    back = lib.wait_for(lambda: lib.http(ROUTER + '/health', timeout=1)[0] == 200 and workers() == dict(
        (u, True) for u in WORKERS), 30)
    print('router drill: kill -9 -> router serving again after %s s (seen down: %s)'
          % ('%.1f' % (time.monotonic() - killed) if back is not None else 'more than 30', down is not None))
    assert back is not None
    assert chat('after the kill')[0] == 200


def test_a_dead_worker_is_left_out_and_taken_back():
    """systemctl stop of node2's instance under a steady closed loop through the router: count the failed requests,
    time until the router marks it unhealthy; start it, time until it is healthy there and gets requests again.

    A request the router sends to node2 between the stop and its health check's verdict can fail (seen: 2 of 84, as
    500, on a run with Prometheus scraping every second): which requests go there depends on the prefix tree. Once
    node2 is left out, none may fail."""
    results = []
    stop = threading.Event()

    def loop():
        i = 0
        while not stop.is_set():
            i += 1
            sent = time.monotonic()
            results.append((sent, chat('steady load %d %f' % (i, time.time()), max_tokens=2)[0]))
            time.sleep(0.02)
    thread = threading.Thread(target=loop)
    thread.start()
    try:
        time.sleep(1)
        t_stop = time.monotonic()
        rc, out = lib.sh(lib.NODES['node2'], 'systemctl stop kvpool-vllm-vllm-8002')
        assert rc == 0, out
        left_out = lib.wait_for(lambda: workers().get(WORKERS[1]) is False, 30)
        verdict = time.monotonic()
        time.sleep(1)
        rc, out = lib.sh(lib.NODES['node2'], 'systemctl start kvpool-vllm-vllm-8002')
        assert rc == 0, out
        back = lib.wait_for(lambda: workers().get(WORKERS[1]) is True, 60)
        time.sleep(1)
    finally:
        stop.set()
        thread.join()
    during = [(t - t_stop, code) for t, code in results if t_stop - 0.5 <= t]
    failed = [(round(t, 2), code) for t, code in during if code != 200]
    print('router drill: worker stopped -> left out after %s s; %d of %d requests through the router failed meanwhile '
          '(sent at %s s after the stop, codes %s); started again -> taken back after %s s'
          % ('%.1f' % left_out if left_out is not None else 'more than 30', len(failed), len(during),
             [f[0] for f in failed] or '-', sorted(set(f[1] for f in failed)) or '-',
             '%.1f' % back if back is not None else 'more than 60'))
    assert left_out is not None and back is not None
    # Failures only among the requests sent before the router's verdict (its /workers is read every 0.1 s).
    assert [f for f in failed if f[0] > verdict - t_stop + 0.2] == []
    # Requests reach node2 again: under cache_aware a burst of overlapping requests with prefixes of their own
    # spreads over both. Their own text must outweigh what they share: the chat template's tokens are a prefix
    # of every request, and where that shared part is over cache_threshold (0.3) of a prompt, the router sends it
    # to the worker that cached the template, which after node2's restart is node1 alone (seen: 30-word prompts
    # all went to node1, 150-word ones split 4 / 4).
    before = lib.metric(WORKERS[1], 'vllm:request_success_total')
    codes = []

    def text(words):
        return ' '.join('%04x' % random.getrandbits(16) for word in range(words))
    threads = [threading.Thread(target=lambda i=i: codes.append(chat('burst ' + text(150 + 3 * i), 16)[0]))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [200] * 8
    assert lib.metric(WORKERS[1], 'vllm:request_success_total') > before


def test_instances_that_refuse_render_get_round_robin_and_cache_aware_is_refused():
    """The instances emulate vLLM 0.32 (render gated: 403 without --enable-scale-out): auto runs round_robin with a
    warning naming the 403s, the spread check passes, and an explicit cache_aware is refused with the reason before
    the router's unit changes. Then the default deployment again."""
    env = {'KVPOOL_SIM_TIME_SCALE': '1.0', 'KVPOOL_SIM_DEVICE_BLOCKS': '40', 'KVPOOL_SIM_VLLM_VERSION': '0.32.0'}
    try:
        run = site(extra_vars={'vllm_instance_environment': env})
        assert run.rc == 0, run.stdout[-6000:]
        flat = ' '.join(run.stdout.split())
        testlib.assert_names(flat, 'runs round_robin', 'not cache_aware', '2 of 2 worker(s)', 'no token ids')
        assert 'http://172.31.250.11:8002 -> render 403' in flat
        assert 'policy round_robin (auto:' in flat
        before = lib.sh(lib.NODES['node1'], 'md5sum /etc/systemd/system/kvpool-router.service')[1]
        refused = site('--tags', 'router', extra_vars={'vllm_instance_environment': env,
                                                       'kvpool_router_policy': 'cache_aware'})
        assert refused.rc != 0
        testlib.assert_names(' '.join(refused.stdout.split()), 'kvpool_router_policy=cache_aware', 'refused',
                             'needs token ids', 'every instance')
        assert lib.sh(lib.NODES['node1'], 'md5sum /etc/systemd/system/kvpool-router.service')[1] == before
    finally:
        healed = site()
        assert healed.rc == 0, healed.stdout[-4000:]


KEY = 'sk-router-test-0123456789abcdef'


def test_the_instances_api_key_works_through_the_router_which_holds_no_key():
    """Instances deployed with an API key: the render probe and the spread check send it (kvpool_router_api_key
    defaults to the instances' key), a client's key passes through the router, no key gets vLLM's 401, and the key is
    nowhere in the router's unit or command line. Then the deployment without a key again."""
    try:
        run = site(extra_vars={'vllm_instance_api_key': KEY})
        assert run.rc == 0, run.stdout[-6000:]
        assert KEY not in run.stdout
        headers = {'Authorization': 'Bearer ' + KEY, 'Content-Type': 'application/json'}
        body = json.dumps({'model': 'qwen', 'max_tokens': 2, 'messages': [{'role': 'user', 'content': 'keyed'}]})
        import urllib.request
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(urllib.request.Request(ROUTER + '/v1/chat/completions', data=body.encode(),
                                                headers=headers), timeout=10) as resp:
            assert resp.status == 200
        assert chat('no key')[0] == 401
        rc, out = lib.sh(lib.NODES['node1'], 'cat /etc/systemd/system/kvpool-router.service; '
                                             'tr "\\0" " " < /proc/$(systemctl show -p MainPID --value '
                                             'kvpool-router)/cmdline')
        assert rc == 0 and 'vllm-router' in out and KEY not in out, out
    finally:
        healed = site()
        assert healed.rc == 0, healed.stdout[-4000:]


def test_second_site_run_changes_nothing():
    run = site()
    assert run.rc == 0, run.stdout[-4000:]
    assert set(run.changed().values()) == {0}, run.changed_tasks()
    testlib.assert_names(' '.join(run.stdout.split()), 'policy cache_aware (auto:', 'every worker serves',
                         '/v1/chat/completions/render')


def test_benchmark_through_the_router_and_the_routing_comparison(tmp_path):
    """benchmark.yml's router steps: dataset A through the router with the hit sources of both instances, then the
    shared-prefix workload through a temporary round-robin router and through the deployed (cache_aware) router.
    Prints the comparison; the goal is a higher device hit rate and a lower median TTFT than round robin (the hit
    rate is asserted, the TTFT ratio printed)."""
    run = lib.playbook('benchmark.yml', '--tags', 'kvpool_benchmark_router,kvpool_benchmark_routing',
                       var_files=(lib.SIM_VARS, VARS), extra_vars={'kvpool_benchmark_report_dir': str(tmp_path)})
    assert run.rc == 0, run.stdout[-6000:]
    report = json.loads((tmp_path / 'kvpool_benchmark.json').read_text())
    routing = report['routing']
    steps = dict((s['id'], s) for s in routing['steps'])
    assert [steps[s]['status'] for s in ('router', 'routing_rr', 'routing_policy')] == ['ok'] * 3
    assert all(v > 0 for v in steps['router']['served'].values()), steps['router']['served']
    comp = routing['comparison']
    for line in report['summary']:
        if line.strip().startswith(('router', 'RR', 'policy', 'routing')):
            print('benchmark: ' + line.strip())
    # Behaviour, not speed: prefix affinity keeps each prefix on one instance, so more of it is found in the
    # instances' own cache than under round robin. The TTFT ratio is a speed figure: printed above (goal_met),
    # not asserted (it swung from x0.52 to x1.10 between runs on the 2-core machine).
    hits = comp['device_hit_rate']
    assert hits['policy'] > hits['round_robin'], comp
    assert 'median TTFT x' in '\n'.join(report['summary'])
    # The temporary round-robin router is gone again.
    assert lib.sh(lib.NODES['node1'], 'systemctl is-active kvpool-router-rr')[1].strip() in ('inactive', 'unknown')
