# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The AISBench path: the guide's model config rendered from the benchmark's variables, the command, and the
parsing of recorded AISBench results (fixtures/aisbench/README.md names their sources). The last test runs the
real ``ais_bench`` against a SIMULATED vllm stand-in on loopback when AISBench is installed, and is skipped with
the reason otherwise."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import shutil
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _aisbench
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'aisbench')

# The seed guide's model config, as printed in its benchmark section.
GUIDE_CONFIG = '''from ais_bench.benchmark.models import VLLMCustomAPIChatStream
from ais_bench.benchmark.utils.model_postprocessors import extract_non_reasoning_content

models = [
    dict(
        attr="service",
        type=VLLMCustomAPIChatStream,
        abbr='vllm-api-stream-chat',
        path="<path_to_your_model>/Qwen2.5-72B-Instruct",
        model="qwen",
        request_rate = 0,
        retry = 2,
        host_ip = "<your_server_ip>",
        host_port = 8002,
        max_out_len = 10,
        batch_size= 25,
        trust_remote_code=False,
        generation_kwargs = dict(
            temperature = 0,
            ignore_eos = True,
        ),
    )
]
'''


def fixture(name):
    with io.open(os.path.join(FIXTURES, name), encoding='utf-8', newline='') as handle:
        return handle.read()


def test_renders_the_guides_model_config():
    settings = _aisbench.model_settings('<your_server_ip>', 8002, 'qwen', '<path_to_your_model>/Qwen2.5-72B-Instruct')
    rendered = _aisbench.render_model_config(settings)
    assert rendered.replace("'", '"') == GUIDE_CONFIG.replace("'", '"')
    compile(rendered, 'vllm_api_stream_chat.py', 'exec')


def test_rendered_config_follows_the_variables_and_quotes_safely():
    settings = _aisbench.model_settings('10.0.0.11', 8003, 'my "model"', '/models/x', max_out_len=32, batch_size=5,
                                        temperature=0.5, ignore_eos=False, api_key='sekret')
    rendered = _aisbench.render_model_config(settings)
    namespace = {}
    code = rendered.replace('from ais_bench.benchmark.models import VLLMCustomAPIChatStream',
                            'VLLMCustomAPIChatStream = "stream-chat"')
    code = code.replace('from ais_bench.benchmark.utils.model_postprocessors import extract_non_reasoning_content', '')
    exec(compile(code, 'cfg', 'exec'), namespace)  # noqa: S102 - our own rendered text
    model = namespace['models'][0]
    assert model['host_ip'] == '10.0.0.11' and model['host_port'] == 8003 and model['model'] == 'my "model"'
    assert model['max_out_len'] == 32 and model['batch_size'] == 5 and model['api_key'] == 'sekret'
    assert model['generation_kwargs'] == {'temperature': 0.5, 'ignore_eos': False}


def test_command_dataset_and_prompt_wrapping():
    argv = _aisbench.command('/usr/bin/ais_bench', '/w/configs', '/w/dataset_1.jsonl', '/w/outputs')
    assert argv[:3] == ['/usr/bin/ais_bench', '--models', _aisbench.MODEL_CONFIG_NAME]
    assert ['--mode', 'perf'] == argv[argv.index('--mode'):argv.index('--mode') + 2]
    assert ['--num-warmups', '0'] == argv[argv.index('--num-warmups'):argv.index('--num-warmups') + 2]
    assert '--custom-dataset-path' in argv and '/w/dataset_1.jsonl' in argv and '--summarizer' in argv
    lines = _aisbench.dataset_jsonl(['a b', 'c "d"']).splitlines()
    expected = [{'question': 'a b', 'answer': ''}, {'question': 'c "d"', 'answer': ''}]
    assert [json.loads(line) for line in lines] == expected
    assert _aisbench.wrap_prompt('x y') == 'Question: x y\nAnswer: '


@pytest.mark.parametrize('text, value, unit', [
    ('2006.0 ms', 2006.0, 'ms'), ('2048.2945  ms', 2048.2945, 'ms'), ('41.6254 token/s', 41.6254, 'token/s'),
    ('0.0813 req/s', 0.0813, 'req/s'), ('1512.5', 1512.5, ''), (8, 8.0, ''), ('1e3 ms', 1000.0, 'ms'),
    ('', None, ''), ('n/a', None, 'n/a'),
])
def test_values_with_units(text, value, unit):
    assert _aisbench.parse_value(text) == (value, unit)


def test_parse_docs_run():
    perf = _aisbench.parse_perf_csv(fixture('docs-performance_benchmark-demo_gsm8k.csv'))
    common = _aisbench.parse_perf_json(fixture('docs-performance_benchmark-demo_gsm8k.json'))
    assert perf['TTFT']['total']['Average'] == (2006.0, 'ms')
    assert common['Request Throughput']['total'] == (0.0813, 'req/s')
    summary = _aisbench.to_summary(perf, common)
    assert summary['requests'] == 8 and summary['succeeded'] == 8 and summary['failed'] == 0
    assert summary['ttft_ms'] == {'count': 8, 'mean': 2006.0, 'median': 2006.1, 'p90': 2006.6, 'p99': 2007.3,
                                  'min': 2005.1, 'max': 2007.4, 'p75': 2006.2}
    assert summary['e2e_ms']['median'] == 12300.0 and summary['tpot_ms']['p90'] == 20.2
    assert summary['output_tokens']['mean'] == 512.0 and summary['input_tokens']['p99'] == 1563.06
    assert summary['duration_s'] == pytest.approx(98.409, abs=1e-3)
    assert summary['request_throughput'] == 0.0813 and summary['output_token_throughput'] == 41.622


def test_parse_stable_stage_with_crlf_and_odd_spacing():
    perf = _aisbench.parse_perf_csv(fixture('docs-stable_stage.csv'))
    assert list(perf['E2EL']) == ['stable']
    summary = _aisbench.to_summary(perf, {}, stage='total')  # falls back to the only stage there is
    assert summary['e2e_ms']['mean'] == pytest.approx(2048.29, abs=0.01) and summary['ttft_ms']['p99'] == 50.055
    assert summary['requests'] == 8 and summary['failed'] is None


def test_parse_recorded_real_run(tmp_path):
    run = tmp_path / 'outputs' / '20261129_182233' / 'performances' / 'vllm-api-stream-chat'
    run.mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, 'ais_bench-3.1.20260630-standin.csv'), str(run / 'dataset_5.csv'))
    shutil.copy(os.path.join(FIXTURES, 'ais_bench-3.1.20260630-standin.json'), str(run / 'dataset_5.json'))
    (tmp_path / 'outputs' / '20260101_000000').mkdir()  # an older run without results is passed over
    result = _aisbench.read_results(str(tmp_path / 'outputs'))
    assert result['csv'].endswith('dataset_5.csv') and result['json'].endswith('dataset_5.json')
    summary = result['summary']
    assert summary['requests'] == 8 and summary['succeeded'] == 8 and summary['failed'] == 0
    assert summary['ttft_ms']['median'] == 26.1 and summary['ttft_ms']['p90'] == 49.5
    assert summary['input_tokens']['mean'] == 256.0 and summary['output_tokens']['max'] == 10.0
    assert summary['duration_s'] == 0.113
    assert _aisbench.read_results(str(tmp_path / 'nothing')) is None


def test_the_concurrency_aisbench_held_is_read_from_its_json(tmp_path):
    # a real run's files (step 2 on the mock cluster, issue 37): Concurrency 7.7276 beside Max Concurrency 25
    run = tmp_path / 'outputs' / '20261205_093611' / 'performances' / 'vllm-api-stream-chat'
    run.mkdir(parents=True)
    for ext in ('csv', 'json'):
        shutil.copy(os.path.join(FIXTURES, 'ais_bench-3.1.20260630-mock-cluster-step2.' + ext),
                    str(run / ('dataset_855347707.' + ext)))
    summary = _aisbench.read_results(str(tmp_path / 'outputs'), concurrency=25)['summary']
    assert summary['concurrency']['requested'] == 25 and summary['concurrency']['max'] == 25
    assert summary['concurrency']['achieved'] == 7.728
    assert summary['requests'] == 100 and summary['ttft_ms']['mean'] == 9.6 and summary['duration_s'] == 0.642
    # without the requested one (module users of read_results), AISBench's Max Concurrency stands for it
    assert _aisbench.read_results(str(tmp_path / 'outputs'))['summary']['concurrency']['requested'] == 25
    other = _aisbench.to_summary({}, _aisbench.parse_perf_json(fixture('ais_bench-3.1.20260630-standin.json')),
                                 'total', 4)
    assert other['concurrency']['requested'] == 4 and other['concurrency']['achieved'] == 3.244
    # results without the keys: nothing made up
    bare = _aisbench.to_summary({}, {})['concurrency']
    assert bare['requested'] is None and bare['achieved'] is None and bare['max'] is None


def test_output_tail_keeps_the_last_lines_and_never_the_key():
    key = 'sk-secret-123'
    text = '\n'.join(['line %d' % n for n in range(30)] + [
        'models = [dict(api_key="%s", host_ip="10.0.0.1")]' % key, 'Authorization: Bearer other-token-9',
        "{'api-key': 'zzz-unrelated'}", ''])
    tail = _aisbench.output_tail(text, [key])
    assert len(tail) == _aisbench.TAIL_LINES and tail[0] == 'line 13'
    joined = '\n'.join(tail)
    assert key not in joined and 'other-token-9' not in joined and 'zzz-unrelated' not in joined
    assert 'host_ip="10.0.0.1"' in joined and joined.count(_aisbench.REDACTED) == 3
    assert _aisbench.output_tail('', ['k']) == [] and _aisbench.output_tail('a\n\n b ', [''], 5) == ['a', ' b']


def test_the_install_line_pins_what_works():
    assert_names(_aisbench.INSTALL_HINT, '--index-url https://download.pytorch.org/whl/cpu',
                 'ais_bench_benchmark==%s' % _aisbench.VERSION, "'pyarrow<16'", "'numpy<2'")


def test_seconds_are_converted_to_ms():
    perf = _aisbench.parse_perf_csv('Performance Parameters,Stage,Average,N\nTTFT,total,1.5 s,3\n')
    assert _aisbench.to_summary(perf)['ttft_ms']['mean'] == 1500.0


# --- the real ais_bench --------------------------------------------------------------------------------------------
def _ais_bench():
    return os.environ.get('KVPOOL_TEST_AIS_BENCH') or shutil.which('ais_bench')


WORDS_TOKENIZER = {
    'version': '1.0', 'truncation': None, 'padding': None,
    'added_tokens': [{'id': 0, 'content': '[UNK]', 'single_word': False, 'lstrip': False, 'rstrip': False,
                      'normalized': False, 'special': True}],
    'normalizer': None, 'pre_tokenizer': {'type': 'WhitespaceSplit'}, 'post_processor': None, 'decoder': None,
    'model': {'type': 'WordLevel', 'vocab': {'[UNK]': 0}, 'unk_token': '[UNK]'},
}


@pytest.mark.aisbench
@pytest.mark.skipif(not _ais_bench(), reason='AISBench is not installed (opt-in, heavy: %s; put ais_bench on PATH '
                    'or set KVPOOL_TEST_AIS_BENCH)' % _aisbench.INSTALL_HINT)
def test_real_ais_bench_run_against_the_standin(tmp_path, capsys):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import kvpool_standin
    from ansible_collections.ascend.kvpool.plugins.modules import kvpool_benchmark

    master, python = kvpool_standin.find()
    if master is None:
        pytest.skip(python)
    cluster = kvpool_standin.Cluster(tmp_path / 'cluster', master, python, ['--sim-startup-s', '0.2'],
                                     {'node1': '0'})
    (tmp_path / 'cluster').mkdir()
    model_dir = tmp_path / 'cluster' / kvpool_standin.MODEL_NAME
    model_dir.mkdir()
    # AISBench's summarizer counts tokens with the model's tokenizer: one of the stand-in's kind (a word a token).
    (model_dir / 'tokenizer.json').write_text(json.dumps(WORDS_TOKENIZER))
    (model_dir / 'tokenizer_config.json').write_text(json.dumps({'tokenizer_class': 'PreTrainedTokenizerFast',
                                                                 'unk_token': '[UNK]'}))
    cluster.start()
    try:
        url = cluster.instances['node1']
        params = dict(name='step1', url=url, dataset_seed=3, num_requests=6, input_tokens=256, output_tokens=10,
                      concurrency=3, tool='aisbench', aisbench_command=_ais_bench(),
                      aisbench_model_path=str(model_dir), aisbench_work_dir=str(tmp_path / 'ais'),
                      metrics_urls={'instance1': url + '/metrics', 'master': cluster.master_metrics})
        with patch_module_args(params):
            with pytest.raises(SystemExit):
                kvpool_benchmark.main()
        res = json.loads(capsys.readouterr().out)
    finally:
        cluster.stop()
    assert not res.get('failed'), res.get('msg', '') + '\n' + '\n'.join(res.get('aisbench', {}).get('output_tail', []))
    summary = res['summary']
    assert summary['requests'] == 6 and summary['succeeded'] == 6 and summary['failed'] == 0
    assert summary['ttft_ms']['count'] == 6 and summary['ttft_ms']['median'] > 0
    assert summary['input_tokens']['mean'] == 256.0 and summary['output_tokens']['mean'] == 10.0
    hits = res['metrics']['instance1']['hits']
    assert hits['prefix_queries'] == 6 * 256 and hits['external_hits'] == 0  # no warm-up request before it
    assert os.path.exists(os.path.join(res['aisbench']['work_dir'], 'configs', 'models',
                                       _aisbench.MODEL_CONFIG_NAME + '.py'))
