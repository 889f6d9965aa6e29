# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kvpool_benchmark runs the guide's sequence against two SIMULATED vllm stand-ins sharing a REAL Mooncake pool
on loopback (tests/unit/plugins/kvpool_standin.py): where the hits come from, TTFT1 > TTFT3 > TTFT2, and the
lost cross-node hits of a PYTHONHASHSEED mismatch, which the report flags. Skipped, with the reason, without
mooncake_master and a Python that imports mooncake.store."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.modules import kvpool_benchmark
from ansible_collections.ascend.kvpool.plugins.plugin_utils import bench_report
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kvpool_standin  # noqa: E402

# Small and fast, but with the guide's shape: 12 prompts of 1024 tokens (8 blocks of 128 each, 7 of them
# reusable), concurrency 4; the simulated NPU cache holds 96 blocks = dataset A, so dataset B pushes A out.
# Time scale 1.0 (the modelled Atlas figures) keeps the steps tens of milliseconds apart.
REQUESTS = 12
TOKENS = 1024
CONCURRENCY = 4
# The simulated costs are set wide apart (prefill 200 ms, own-segment load 36 ms, other-segment load 100 ms per 1k
# tokens) so that the TTFT order the report checks holds with margin on a loaded 2-core machine: with the
# stand-in's defaults (100 / 36 / 47) steps 2 and 3 were 10 ms apart, less than the scheduling noise of a busy CI.
SIM = ['--sim-time-scale', '1.0', '--sim-startup-s', '0.2', '--sim-device-blocks', '96',
       '--sim-prefill-ms-per-1k-tokens', '200', '--sim-pool-remote-load-ms-per-1k-tokens', '100']
HIT_TOKENS = REQUESTS * ((TOKENS - 1) // 128) * 128


def run(capsys, check=False, **args):
    params = dict(num_requests=REQUESTS, input_tokens=TOKENS, output_tokens=10, concurrency=CONCURRENCY,
                  request_timeout=60)
    params.update(args)
    if check:
        params['_ansible_check_mode'] = True
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            kvpool_benchmark.main()
    return json.loads(capsys.readouterr().out)


def closed_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_check_mode_sends_nothing(capsys):
    # Nothing listens there: any request would fail the module.
    url = 'http://127.0.0.1:%d' % closed_port()
    res = run(capsys, check=True, name='step1', url=url, dataset_seed=1, metrics_urls={'instance1': url + '/metrics'})
    assert res['check_mode'] is True and res['changed'] is False
    assert_names(res['msg'], 'would send', '12 chat requests', '1024 prompt tokens')
    assert 'summary' not in res


def test_unreachable_instance_fails_with_the_url(capsys):
    url = 'http://127.0.0.1:%d' % closed_port()
    res = run(capsys, name='step1', url=url, dataset_seed=1)
    assert res['failed'] and url in res['msg']


def _cluster(tmp_path_factory, seeds):
    master, python = kvpool_standin.find()
    if master is None:
        pytest.skip(python)
    return kvpool_standin.Cluster(tmp_path_factory.mktemp('bench'), master, python, SIM, seeds).start()


def guide_sequence(capsys, cluster, seed):
    urls = {'instance1': cluster.instances['node1'] + '/metrics', 'instance2': cluster.instances['node2'] + '/metrics',
            'master': cluster.master_metrics}
    out = {}
    for step, node, data_seed in (('step1', 'node1', seed), ('flush', 'node1', seed + 1), ('step2', 'node1', seed),
                                  ('step3', 'node2', seed)):
        out[step] = run(capsys, name=step, url=cluster.instances[node], dataset_seed=data_seed, metrics_urls=urls)
    return out


@pytest.fixture(scope='module')
def same_seed(tmp_path_factory):
    cluster = _cluster(tmp_path_factory, {'node1': '0', 'node2': '0'})
    yield cluster
    cluster.stop()


def test_guide_sequence_shows_where_hits_came_from(same_seed, capsys, tmp_path):
    res = guide_sequence(capsys, same_seed, 4242)
    for step in res.values():
        assert step['summary']['requests'] == REQUESTS and step['summary']['failed'] == 0, step['summary']
        assert step['dataset']['exact'] and step['dataset']['method'] == 'tokenize'
        assert step['model'] == 'qwen'
        assert len(step['requests']) == REQUESTS
    assert res['step1']['dataset']['fingerprint'] == res['step2']['dataset']['fingerprint'] \
        == res['step3']['dataset']['fingerprint'] != res['flush']['dataset']['fingerprint']
    one = res['step1']['metrics']['instance1']['hits']
    assert one['prefix_queries'] == REQUESTS * TOKENS and one['prefix_hits'] == 0 and one['external_hits'] == 0
    two = res['step2']['metrics']['instance1']['hits']
    assert two['prefix_hits'] == 0  # dataset B pushed A out of the (simulated) device cache
    assert two['external_hits'] == HIT_TOKENS and two['pool_own_segment_tokens'] == HIT_TOKENS
    three = res['step3']['metrics']['instance2']['hits']
    assert three['external_hits'] == HIT_TOKENS and three['pool_other_segment_tokens'] == HIT_TOKENS
    assert res['step3']['metrics']['instance1']['hits']['prompt_tokens'] == 0  # instance 1 untouched in step 3
    master = res['step1']['metrics']['master']['master']
    assert master['after']['key_count'] > master['before']['key_count']
    assert master['after']['allocated_bytes'] > master['before']['allocated_bytes']
    medians = [res[s]['summary']['ttft_ms']['median'] for s in ('step1', 'step2', 'step3')]
    with capsys.disabled():
        print('\nmedian TTFT ms (SIMULATED): step1 %.1f, step2 %.1f, step3 %.1f' % tuple(medians))
    assert medians[0] > medians[2] > medians[1], medians
    # the target instance's own TTFT over each step, from its vllm:time_to_first_token_seconds histogram
    for sid, target in (('step1', 'instance1'), ('step2', 'instance1'), ('step3', 'instance2')):
        server = res[sid]['metrics'][target]['server_ttft']
        assert server['count'] == REQUESTS and server['mean_ms'] > 0, server
        assert server['p50_ms'] <= server['p90_ms']
    assert res['step3']['metrics']['instance1']['server_ttft']['count'] == 0

    report = bench_report.build_report(res, {'num_requests': REQUESTS, 'concurrency': CONCURRENCY,
                                             'input_tokens': TOKENS}, label='')
    assert report['ok'], report['findings']
    assert report['simulated'] and report['label'].startswith('SIMULATED')
    assert {c['check'] for c in report['checks']} >= {'step1_cold', 'flush_evicted', 'step2_pool_hits',
                                                      'step3_cross_node_hits', 'ttft_order'}
    markdown = bench_report.render_markdown(report, 'chart.png')
    assert 'REFERENCE (the guide, other hardware' in markdown and 'SIMULATED' in markdown
    assert all(report['steps'][i]['server_ttft']['count'] == REQUESTS for i in (0, 2, 3))
    assert 'server TTFT mean / p50 / p90 (ms)' in markdown
    assert bench_report.render_chart(report, str(tmp_path / 'chart.png')) is None
    assert (tmp_path / 'chart.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'

    # Dataset A again on instance 1 right away: now it is cached, and the report says step 1 was not cold.
    again = run(capsys, name='step1', url=same_seed.instances['node1'], dataset_seed=4242,
                metrics_urls={'instance1': same_seed.instances['node1'] + '/metrics'})
    warm = bench_report.build_report({'step1': again})
    cold = [c for c in warm['checks'] if c['check'] == 'step1_cold'][0]
    assert not cold['ok'] and 'not cold' in cold['message']


@pytest.fixture(scope='module')
def other_seed(tmp_path_factory):
    cluster = _cluster(tmp_path_factory, {'node1': '0', 'node2': '1'})
    yield cluster
    cluster.stop()


def test_pythonhashseed_mismatch_loses_cross_node_hits_and_is_flagged(other_seed, capsys):
    res = guide_sequence(capsys, other_seed, 777)
    assert res['step2']['metrics']['instance1']['hits']['external_hits'] == HIT_TOKENS
    three = res['step3']['metrics']['instance2']['hits']
    assert three['external_queries'] == REQUESTS * TOKENS and three['external_hits'] == 0
    report = bench_report.build_report(res)
    flagged = [f for f in report['findings'] if f['check'] == 'step3_cross_node_hits']
    assert flagged
    assert_names(flagged[0]['message'], 'PYTHONHASHSEED mismatch', 'pool not shared')
    assert_names('\n'.join(report['summary']), 'PYTHONHASHSEED mismatch', 'pool not shared')


# SIMULATED ais_bench: starts (--help answers), then fails every run without results.
FAKE_AIS_BENCH = '''#!/bin/sh
[ "$1" = --help ] && { echo "usage: ais_bench"; exit 0; }
echo "ais_bench (stand-in): no results" >&2
exit 3
'''


def test_aisbench_config_with_the_api_key_is_private(capsys, tmp_path):
    # The instance is never asked (model and word counting given); the stand-in ais_bench fails after the config
    # is rendered, which is what matters here: where the key went.
    fake = tmp_path / 'ais_bench'
    fake.write_text(FAKE_AIS_BENCH)
    fake.chmod(0o755)
    key = 'sk-kvpool-aisbench-unit-key'
    res = run(capsys, name='step1', url='http://127.0.0.1:%d' % closed_port(), dataset_seed=1, model='qwen',
              tokenize='words', tool='aisbench', aisbench_command=str(fake), aisbench_work_dir=str(tmp_path / 'w'),
              api_key=key, num_requests=2, input_tokens=16, aisbench_model_path=str(tmp_path))
    assert res['failed'] and 'ais_bench failed (rc 3)' in res['msg']
    assert key not in json.dumps(res)
    config = res['aisbench']['config']
    with open(config) as fh:
        assert 'api_key="%s"' % key in fh.read()
    assert os.stat(config).st_mode & 0o777 == 0o600
    assert os.stat(res['aisbench']['work_dir']).st_mode & 0o777 == 0o700
    holding = [os.path.join(d, f) for d, dummy, files in os.walk(str(tmp_path / 'w')) for f in files
               if key in open(os.path.join(d, f), errors='replace').read()]
    assert holding == [config]


# --- tool=aisbench end to end with a SIMULATED ais_bench ----------------------------------------------------------
# SIMULATED: aisbench_standin.py stands in for ais_bench (the real one needs torch and is too heavy for CI) and for
# the instance (a streaming chat server on loopback). The stand-in reads the model config the module renders, sends
# the dataset to the URL in it and writes AISBench's real output layout and keys (Concurrency, Max Concurrency).
import tempfile  # noqa: E402

import aisbench_standin  # noqa: E402
from ansible_collections.ascend.kvpool.plugins.module_utils import _aisbench  # noqa: E402

AIS_REQUESTS = 8
AIS_CONCURRENCY = 4


@pytest.fixture()
def ais(tmp_path, monkeypatch):
    """A private temporary directory (to see that the module leaves nothing there), a model directory and the
    SIMULATED instance."""
    tmp = tmp_path / 'tmp'
    tmp.mkdir()
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp))
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    with aisbench_standin.FakeServer() as server:
        yield {'tmp': tmp, 'model_dir': str(model_dir), 'server': server.srv, 'url': server.url,
               'bin': tmp_path / 'bin'}


def run_ais(capsys, ais, mode='ok', **extra):
    ais['bin'].mkdir(exist_ok=True)
    command = aisbench_standin.write(ais['bin'] / 'ais_bench', mode)
    params = dict(name='step1', url=ais['url'], dataset_seed=5, model='qwen', tokenize='words', tool='aisbench',
                  aisbench_command=command, aisbench_model_path=ais['model_dir'], num_requests=AIS_REQUESTS,
                  input_tokens=32, concurrency=AIS_CONCURRENCY)
    params.update(extra)
    return run(capsys, **params)


def test_aisbench_step_with_the_simulated_ais_bench(capsys, ais):
    res = run_ais(capsys, ais)
    assert not res.get('failed'), res.get('msg')
    summary = res['summary']
    assert summary['requests'] == AIS_REQUESTS and summary['succeeded'] == AIS_REQUESTS and summary['failed'] == 0
    assert summary['ttft_ms']['count'] == AIS_REQUESTS and summary['ttft_ms']['median'] > 0
    # every prompt went to the instance in AISBench's qa template, at most batch_size at a time
    assert len(ais['server'].prompts) == AIS_REQUESTS
    assert all(p.startswith('Question: ') and p.endswith('\nAnswer: ') for p in ais['server'].prompts)
    assert ais['server'].max_active <= AIS_CONCURRENCY
    # the concurrency asked for and the one AISBench says it held (its own "Concurrency", from its JSON)
    held = summary['concurrency']
    assert held['requested'] == AIS_CONCURRENCY and held['max'] == AIS_CONCURRENCY
    assert 0 < held['achieved'] <= AIS_CONCURRENCY + 0.01, held
    # the temporary work directory is gone, and the result says its paths are
    assert res['aisbench']['kept'] is False
    assert os.listdir(str(ais['tmp'])) == []


def test_a_failed_aisbench_step_shows_its_last_lines_without_the_key(capsys, ais):
    key = 'sk-kvpool-standin-key'
    res = run_ais(capsys, ais, mode='fail', api_key=key)
    assert res['failed'] and res['tool'] == 'aisbench' and res['step'] == 'step1'
    assert_names(res['msg'], 'ais_bench failed (rc 1)', 'last', 'SIMULATED failure', 'log line 29',
                 _aisbench.REDACTED)
    assert 'log line 5\n' not in res['msg']  # the tail, not the whole log
    assert len(res['aisbench']['output_tail']) == _aisbench.TAIL_LINES
    assert key not in json.dumps(res)
    assert os.listdir(str(ais['tmp'])) == []  # removed on failure too


def test_an_empty_or_missing_model_path_fails_before_any_request(capsys, ais):
    host = socket.gethostname()
    res = run_ais(capsys, ais, aisbench_model_path='')
    assert res['failed']
    assert_names(res['msg'], 'aisbench_model_path', 'empty', host, 'set aisbench_model_path')
    missing = '/nonexistent/kvpool-model'
    res = run_ais(capsys, ais, aisbench_model_path=missing, variable_prefix='kvpool_benchmark_')
    assert res['failed']
    assert_names(res['msg'], 'kvpool_benchmark_aisbench_model_path=%s' % missing, 'does not exist', host,
                 'kvpool_benchmark_client_host')
    assert ais['server'].prompts == []


def test_a_missing_ais_bench_fails_before_any_request_with_the_install_line(capsys, ais):
    res = run_ais(capsys, ais, aisbench_command='kvpool-no-such-ais-bench', variable_prefix='kvpool_benchmark_')
    assert res['failed']
    assert_names(res['msg'], 'kvpool_benchmark_aisbench_command=kvpool-no-such-ais-bench', 'not found',
                 socket.gethostname(), _aisbench.INSTALL_TORCH, "'pyarrow<16'", "'numpy<2'", _aisbench.VERSION)
    assert ais['server'].prompts == []


def test_an_ais_bench_that_cannot_start_fails_before_any_request(capsys, ais):
    res = run_ais(capsys, ais, mode='broken')
    assert res['failed']
    assert_names(res['msg'], 'aisbench_command=', 'cannot start', socket.gethostname(), 'numpy.core.multiarray',
                 _aisbench.INSTALL_TORCH, "'pyarrow<16'")
    assert ais['server'].prompts == []
    assert os.listdir(str(ais['tmp'])) == []


def test_the_docs_give_the_install_line_of_the_module(capsys):
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'docs', 'benchmark.md')
    with open(docs) as handle:
        text = handle.read()
    assert_names(text, _aisbench.INSTALL_TORCH, _aisbench.INSTALL_AISBENCH)
