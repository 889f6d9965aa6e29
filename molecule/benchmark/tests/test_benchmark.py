"""The guide's TTFT benchmark on the SIMULATED two-node cluster: what an operator reads after
`ansible-playbook benchmark.yml` (the summary, reports/kvpool_benchmark.{json,md,png}), and the PYTHONHASHSEED
mismatch that silently loses every cross-node hit, which the report must flag.

The deployment comes from the scenario's prepare (site.yml with vars/sim.yml); converge (and idempotence) ran
benchmark.yml and wrote the report read here.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCENARIO = Path(__file__).resolve().parents[1]
SIM_VARS = SCENARIO / 'vars' / 'sim.yml'
INVENTORY = REPO / 'inventories' / 'sim'
BIN = Path(sys.executable).parent
CONVERGE_REPORT = REPO / '.tmp' / 'molecule-benchmark'
HINT = 'PYTHONHASHSEED mismatch or pool not shared'
REQUESTS, TOKENS = 20, 1024
HIT_TOKENS = REQUESTS * ((TOKENS - 1) // 128) * 128


class Run:
    def __init__(self, rc, stdout, report_dir):
        self.rc = rc
        self.stdout = stdout
        path = Path(report_dir) / 'kvpool_benchmark.json'
        self.report = json.loads(path.read_text()) if path.exists() else None
        self.report_dir = Path(report_dir)

    def recap(self):
        out = {}
        for m in re.finditer(r'^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$', self.stdout, re.M):
            out[m.group(1)] = dict((k, int(v)) for k, v in re.findall(r'(\w+)=(\d+)', m.group(2)))
        return out


def playbook(name, *args, extra_vars=None, report_dir=None):
    report_dir = report_dir or tempfile.mkdtemp(prefix='kvpool-bench-')
    ev = {'kvpool_benchmark_report_dir': str(report_dir),
          'vllm_instance_report_path': str(Path(report_dir) / 'vllm_instances.json'),
          'npu_network_report_path': str(Path(report_dir) / 'npu_network.json')}
    ev.update(extra_vars or {})
    argv = [str(BIN / 'ansible-playbook'), str(REPO / name), '-i', str(INVENTORY), '-e', '@%s' % SIM_VARS,
            '-e', json.dumps(ev)] + list(args)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1')
    proc = subprocess.run(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900, check=False)
    return Run(proc.returncode, proc.stdout, report_dir)


def step(report, step_id):
    return next(s for s in report['steps'] if s['id'] == step_id)


def check(report, name):
    return next((c for c in report['checks'] if c['check'] == name), None)


@pytest.fixture(scope='module')
def report():
    path = CONVERGE_REPORT / 'kvpool_benchmark.json'
    assert path.exists(), 'converge wrote no report at %s' % path
    return json.loads(path.read_text())


def test_three_steps_in_the_guides_order_and_shape(report):
    assert report['ok'], report['findings']
    assert [s['id'] for s in report['steps']] == ['step1', 'flush', 'step2', 'step3']
    for s in report['steps']:
        assert s['status'] == 'ok', s
        assert s['summary']['requests'] == REQUESTS and s['summary']['failed'] == 0
    assert step(report, 'step1')['url'] == step(report, 'step2')['url'] == 'http://172.31.250.11:8002'
    assert step(report, 'step3')['url'] == 'http://172.31.250.12:8002'
    ttft = dict((sid, report['ttft_ms'][sid]['median']) for sid in ('step1', 'step2', 'step3'))
    print('median TTFT ms (SIMULATED): %s' % ttft)
    assert ttft['step1'] > ttft['step3'] > ttft['step2'], ttft
    assert check(report, 'ttft_order')['ok']


def test_hits_come_from_where_the_guide_says(report):
    one = step(report, 'step1')['hits']
    assert one['prefix_hits'] == 0 and one['external_hits'] == 0  # no cache at all in step 1
    two = step(report, 'step2')['hits']
    assert two['prefix_hits'] == 0  # dataset B pushed A out of the (simulated) device cache
    assert two['external_hits'] == HIT_TOKENS and two['pool_own_segment_tokens'] == HIT_TOKENS  # node1's DRAM
    three = step(report, 'step3')['hits']
    assert three['external_hits'] == HIT_TOKENS and three['pool_other_segment_tokens'] == HIT_TOKENS  # node1's
    master = step(report, 'step1')['master']
    assert master['after']['key_count'] > master['before']['key_count'] >= 0
    assert master['after']['allocated_bytes'] > master['before']['allocated_bytes']


def test_every_artifact_says_simulated(report):
    assert report['simulated'] and 'SIMULATED' in report['label']
    markdown = (CONVERGE_REPORT / 'kvpool_benchmark.md').read_text()
    # line 1 is the ownership header (a comment, not shown); the title under it says SIMULATED
    assert markdown.startswith('<!-- Written by ascend.kvpool.kvpool_benchmark_report')
    title = [line for line in markdown.splitlines() if line.strip() and not line.startswith('<!--')][0]
    assert 'SIMULATED' in title, title
    assert 'REFERENCE (the guide, other hardware' in markdown and '| 100 | 25 | 2322 | 739 | 948 |' in markdown
    png = (CONVERGE_REPORT / 'kvpool_benchmark.png').read_bytes()
    assert png[:8] == b'\x89PNG\r\n\x1a\n' and len(png) > 10000


def test_check_mode_sends_nothing():
    run = playbook('benchmark.yml', '--check')
    assert run.rc == 0, run.stdout[-3000:]
    assert run.report is None  # nothing measured, nothing written
    assert run.stdout.count('would send 20 chat requests') == 4  # the module's check-mode msg, once per step
    assert all(r['changed'] == 0 for r in run.recap().values())


def test_pythonhashseed_mismatch_loses_cross_node_hits_and_is_flagged():
    """node2 redeployed with PYTHONHASHSEED=1 (node1 keeps 0): same prompts, same pool, but no block hash of node1
    matches on node2, so step 3 gets no external hit; the run fails and the report says why."""
    seed = playbook('site.yml', '--limit', 'node2', '--tags', 'instances',
                    extra_vars={'vllm_instance_python_hash_seed': '1'})
    assert seed.rc == 0, seed.stdout[-4000:]
    try:
        run = playbook('benchmark.yml')
        assert run.rc != 0, run.stdout[-3000:]
        report = run.report
        assert step(report, 'step2')['hits']['external_hits'] == HIT_TOKENS  # node1 still hits its own DRAM
        three = step(report, 'step3')['hits']
        assert three['external_queries'] == REQUESTS * TOKENS and three['external_hits'] == 0
        flagged = check(report, 'step3_cross_node_hits')
        assert not flagged['ok'] and HINT in flagged['message']
        assert HINT in run.stdout  # in the summary the operator reads
        assert HINT in (run.report_dir / 'kvpool_benchmark.md').read_text()
    finally:
        back = playbook('site.yml', '--limit', 'node2', '--tags', 'instances')
        assert back.rc == 0, back.stdout[-4000:]
    again = playbook('benchmark.yml')
    assert again.rc == 0 and again.report['ok'], again.stdout[-3000:]
