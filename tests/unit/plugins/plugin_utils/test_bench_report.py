# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark report (plugin_utils/bench_report.py), its action plugin, and the plan filter: built from step
results shaped like the kvpool_benchmark module's, covering the guide's good run and every finding."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.plugins.filter import kvpool_benchmark as plan_filter
from ansible_collections.ascend.kvpool.plugins.plugin_utils import bench_plan
from ansible_collections.ascend.kvpool.plugins.plugin_utils import bench_report
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import instance_plans  # noqa: E402

HINT = 'PYTHONHASHSEED mismatch or pool not shared'


def hits(prefix_q=102400, prefix_h=0, ext_q=102400, ext_h=0, own=0, other=0):
    return {'prefix_queries': prefix_q, 'prefix_hits': prefix_h,
            'prefix_hit_rate': round(float(prefix_h) / prefix_q, 4) if prefix_q else None,
            'external_queries': ext_q, 'external_hits': ext_h,
            'external_hit_rate': round(float(ext_h) / ext_q, 4) if ext_q else None,
            'pool_own_segment_tokens': own, 'pool_other_segment_tokens': other, 'prompt_tokens': prefix_q}


def result(name, ttft_median, target_hits, fingerprint='aaaa', failed=0, sim=True):
    target = 'instance2' if name == 'step3' else 'instance1'
    other = 'instance1' if target == 'instance2' else 'instance2'
    after = {'kvpool_sim_pool_put_keys_total': 10.0} if sim else {'vllm:prefix_cache_queries_total': 1.0}
    ttft = {'count': 100 - failed, 'mean': ttft_median * 1.05, 'median': ttft_median, 'p90': ttft_median * 1.3,
            'p99': ttft_median * 1.5, 'min': ttft_median / 3, 'max': ttft_median * 1.6}
    return {
        'changed': False, 'step': name, 'url': 'http://10.0.0.%d:8002' % (12 if target == 'instance2' else 11),
        'model': 'qwen', 'tool': 'builtin', 'check_mode': False, 'started': '2026-11-29T18:00:00Z',
        'dataset': {'seed': 1, 'count': 100, 'input_tokens': 1024, 'tokens': {'min': 1024, 'max': 1024, 'mean': 1024},
                    'exact': True, 'method': 'tokenize', 'fingerprint': fingerprint},
        'summary': {'requests': 100, 'succeeded': 100 - failed, 'failed': failed,
                    'errors': [{'error': 'HTTP 500: boom', 'count': failed}] if failed else [],
                    'failed_indexes': list(range(failed)), 'short_outputs': [], 'ttft_ms': ttft,
                    'tpot_ms': {'median': 4.0}, 'e2e_ms': {'median': ttft_median + 40}, 'duration_s': 2.0},
        'requests': [],
        'metrics': {
            target: {'url': 'x', 'error': None, 'before': {}, 'after': after, 'delta': {}, 'hits': target_hits},
            other: {'url': 'y', 'error': None, 'before': {}, 'after': after, 'delta': {}, 'hits': hits(0, 0, 0, 0)},
            'master': {'url': 'z', 'error': None, 'before': {}, 'after': {'master_key_count': 3200.0}, 'delta': {},
                       'master': {'before': {'key_count': 0, 'allocated_bytes': 0},
                                  'after': {'key_count': 3200, 'allocated_bytes': 52428800}}},
        },
    }


def guide_run(sim=True):
    return {
        'step1': result('step1', 2250.0, hits(), sim=sim),
        'flush': result('flush', 2260.0, hits(), fingerprint='bbbb', sim=sim),
        'step2': result('step2', 720.0, hits(ext_h=89600, own=89600), sim=sim),
        'step3': result('step3', 940.0, hits(ext_h=89600, other=89600), sim=sim),
    }


SETTINGS = {'num_requests': 100, 'concurrency': 25, 'input_tokens': 1024}


def test_the_guides_run_passes_every_check():
    report = bench_report.build_report(guide_run(), SETTINGS, label='lab', generated='2026-11-29T18:00:00Z')
    assert report['ok'] and report['findings'] == []
    assert [c['check'] for c in report['checks']] == ['step1_cold', 'flush_evicted', 'step2_pool_hits',
                                                      'step3_cross_node_hits', 'ttft_order']
    assert report['ttft_ms']['step1']['median'] == 2250.0 and report['ttft_ms']['step3']['median'] == 940.0
    assert report['simulated'] and report['label'] == 'SIMULATED (vllm stand-in) lab'
    assert report['summary'][0].startswith('KV pool TTFT benchmark [')
    assert_names(report['summary'][0], 'SIMULATED', 'vllm stand-in', 'lab', 'as in the guide')
    assert report['steps'][3]['reference_ttft_ms'] == 948
    assert report['steps'][1]['reference_ttft_ms'] is None
    json.dumps(report)


def test_a_real_cluster_is_not_labelled_simulated():
    report = bench_report.build_report(guide_run(sim=False), SETTINGS, label='prod-a')
    assert not report['simulated'] and report['label'] == 'prod-a'
    markdown = bench_report.render_markdown(report)
    assert 'SIMULATED' not in markdown
    assert 'REFERENCE (the guide, other hardware' in markdown


def test_test_equipment_is_named_and_never_hardware_figures(tmp_path):
    """Issue 16: a run of the real vLLM engine (CPU build) is no hardware either; a stand-in run stays SIMULATED."""
    real = bench_report.build_report(guide_run(sim=False), SETTINGS, label='mock nodes',
                                     test_equipment='real vLLM engine (CPU build, tiny model)')
    assert not real['simulated'] and real['test_equipment'] == 'real vLLM engine (CPU build, tiny model)'
    assert real['label'] == 'real vLLM engine (CPU build, tiny model), mock nodes'
    assert_names(real['summary'][0], 'KV pool TTFT benchmark', 'real vLLM engine', 'tiny model', 'mock nodes')
    markdown = bench_report.render_markdown(real)
    assert 'SIMULATED' not in markdown
    assert_names(markdown, '**TEST EQUIPMENT, real vLLM', 'not the hardware the guide', 'not hardware figures')
    assert '| this run (real vLLM engine (CPU build, tiny model), builtin client), median |' in markdown
    stand_in = bench_report.build_report(guide_run(), SETTINGS, label='lab', test_equipment='real vLLM engine')
    assert stand_in['simulated'] and stand_in['test_equipment'] == ''
    assert 'TEST EQUIPMENT' not in bench_report.render_markdown(stand_in)


@pytest.mark.parametrize('change, check, words', [
    (lambda r: r['step3']['metrics']['instance2'].update(hits=hits(ext_h=0)), 'step3_cross_node_hits', HINT),
    (lambda r: r['step1']['metrics']['instance1'].update(hits=hits(ext_h=8960)), 'step1_cold', 'not cold'),
    (lambda r: r['step2']['metrics']['instance1'].update(hits=hits(prefix_h=89600, ext_q=12800)), 'flush_evicted',
     'raise kvpool_benchmark_flush_requests'),
    (lambda r: r['step2']['metrics']['instance1'].update(hits=hits(ext_h=0)), 'step2_pool_hits',
     'the KV connector stored or loaded nothing'),
    (lambda r: r['step2']['summary']['ttft_ms'].update(median=3000.0), 'ttft_order', 'not the guide'),
    (lambda r: r.update(step2=result('step2', 720.0, hits(ext_h=89600), failed=3)), 'failed_requests',
     '3 of 100 requests failed: HTTP 500: boom x3'),
    (lambda r: r.update(step3={'failed': False, 'msg': 'cannot list the served models of http://x: refused'}),
     'step_failed', 'cannot list the served models'),
    (lambda r: r['step3']['dataset'].update(fingerprint='cccc'), 'same_dataset', 'set kvpool_benchmark_seed'),
    (lambda r: r['step2']['metrics']['instance1'].update(hits=None, error='http://x/metrics: refused'), 'metrics',
     'refused'),
])
def test_each_finding_names_the_cause(change, check, words):
    results = copy.deepcopy(guide_run())
    change(results)
    report = bench_report.build_report(results, SETTINGS)
    assert not report['ok']
    found = [f for f in report['findings'] if f['check'] == check]
    assert found, report['findings']
    assert words in found[0]['message']
    assert any(words in line for line in report['summary'])


def test_steps_not_run_and_check_mode():
    partial = bench_report.build_report({'step1': guide_run()['step1'], 'step2': {'skipped': True}})
    assert [s['status'] for s in partial['steps']] == ['ok', 'not run', 'not run', 'not run']
    assert partial['ok'] and partial['ttft_ms']['step2']['median'] is None
    checked = bench_report.build_report({'step1': {'check_mode': True, 'msg': 'check mode: would send'}})
    assert checked['steps'][0]['status'] == 'check mode' and checked['ok']


def test_markdown_has_the_guides_table_and_the_evidence():
    report = bench_report.build_report(guide_run(), SETTINGS, instances={'instance1': {'host': 'node1', 'url': 'u1'}})
    markdown = bench_report.render_markdown(report, 'kvpool_benchmark.png')
    lines = markdown.splitlines()
    assert lines[0].startswith('# ') and 'SIMULATED' in lines[0]
    assert '| | requests | concurrency | TTFT1 (ms) | TTFT2 (ms) | TTFT3 (ms) |' in lines
    assert '| this run (SIMULATED, builtin client), median | 100 | 25 | 2250.0 | 720.0 | 940.0 |' in lines
    reference = [line for line in lines if line.startswith('| REFERENCE (the guide, other hardware')]
    assert reference and reference[0].endswith('| 100 | 25 | 2322 | 739 | 948 |')
    assert any(line.startswith('| TTFT3 | instance2 | 100/0 |') and '| 0 / 89600 |' in line for line in lines)
    assert '- instance1: host node1, url u1' in lines
    assert '![TTFT per step](kvpool_benchmark.png)' in lines


def test_chart_is_a_png(tmp_path):
    pytest.importorskip('matplotlib')
    report = bench_report.build_report(guide_run(), SETTINGS)
    path = tmp_path / 'chart.png'
    assert bench_report.render_chart(report, str(path)) is None
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    empty = bench_report.build_report({})
    assert bench_report.render_chart(empty, str(tmp_path / 'none.png')) == 'no measured step: no chart'


# --- the plan filter ------------------------------------------------------------------------------------------------
HOSTVARS = {
    'node1': {'ansible_host': '10.0.0.11', 'vllm_instance_instances': [{'devices': [0, 1, 2, 3], 'port': 8002},
                                                                       {'name': 'second', 'port': 8003,
                                                                        'devices': [4]}],
              'vllm_instance_model_path': '/models/qwen'},
    'node2': {'ansible_host': '10.0.0.12'},
    'node3': {'ansible_host': 'fe80::3', 'vllm_instance_listen_host': '0.0.0.0', 'mooncake_master_metrics_port': 9100},
}
GROUPS = {'npu_nodes': ['node1', 'node2', 'node3'], 'mooncake_master': ['node3']}
# What the role passes: the shared defaults, from their one source (roles/kvpool_defaults).
_SHARED = yaml.safe_load((Path(__file__).resolve().parents[4] / 'roles/kvpool_defaults/defaults/main.yml').read_text())
DEFAULTS = {'defaults': dict((k, _SHARED['kvpool_defaults_' + k]) for k in bench_plan.DEFAULT_KEYS)}


# Every node planned as role vllm_instance plans it (benchmark.yml's first play).
PLANNED = instance_plans.planned(HOSTVARS)


def _plan(settings, hostvars=None, groups=None):
    return plan_filter.kvpool_benchmark_plan(dict(DEFAULTS, **settings), PLANNED if hostvars is None else hostvars,
                                             GROUPS if groups is None else groups)


def test_plan_defaults_from_the_inventory():
    plan = _plan({'num_requests': 100})
    assert plan['errors'] == []
    assert plan['instance1']['url'] == 'http://10.0.0.11:8002' and plan['instance1']['name'] == 'vllm-8002'
    assert plan['instance2']['url'] == 'http://10.0.0.12:8002'  # no list: the guide's one instance on 8002
    assert plan['master']['metrics_url'] == 'http://[fe80::3]:9100/metrics'
    assert plan['metrics_urls'] == {'instance1': 'http://10.0.0.11:8002/metrics',
                                    'instance2': 'http://10.0.0.12:8002/metrics',
                                    'master': 'http://[fe80::3]:9100/metrics'}
    assert plan['client_host'] == 'node1' and plan['flush_requests'] == 100
    assert plan['seed_source'] == 'new for this run' and plan['seed_b'] == plan['seed_a'] + 1
    assert plan['aisbench_model_path'] == '/models/qwen'
    assert plan['aisbench_model_path_source'] == 'the model instance1 serves (its plan)'


def test_plan_aisbench_model_path_from_the_instance_plan_unless_set():
    # instance 1 given by URL (no plan entry): the model instance 2 serves - node2 sets no model path, so its plan
    # holds role vllm_instance's default (which benchmark.yml itself never sees: the plan carries it)
    plan = _plan({'instance1': {'url': 'http://10.9.9.9:8002'}})
    assert plan['aisbench_model_path'] == PLANNED['node2']['vllm_instance_plan']['instances'][0]['model']
    assert plan['aisbench_model_path'] and 'instance2' in plan['aisbench_model_path_source']
    plan = _plan({'aisbench_model_path': '/data/tokenizer'})
    assert plan['aisbench_model_path'] == '/data/tokenizer'
    assert plan['aisbench_model_path_source'] == 'kvpool_benchmark_aisbench_model_path'


def test_plan_overrides():
    plan = _plan(
        {'instance1': {'host': 'node1', 'instance': 'second'}, 'instance2': {'host': 'node3'}, 'seed': 5,
         'master_metrics_url': 'none', 'client_host': 'localhost', 'num_requests': 10, 'flush_requests': 40})
    assert plan['errors'] == []
    assert plan['instance1']['url'] == 'http://10.0.0.11:8003' and plan['instance1']['name'] == 'second'
    assert plan['instance2']['url'] == 'http://[fe80::3]:8002'  # wildcard listen address: ansible_host
    assert plan['master']['metrics_url'] is None and 'master' not in plan['metrics_urls']
    assert (plan['seed_a'], plan['seed_b'], plan['seed_source']) == (5, 6, 'set')
    assert plan['client_host'] == 'localhost' and plan['flush_requests'] == 40
    url = _plan({'instance1': {'url': '10.1.1.1:9000/'}, 'instance2': {'host': 'node2'}})
    assert url['instance1']['url'] == 'http://10.1.1.1:9000'


@pytest.mark.parametrize('settings, words', [
    ({'group': 'missing'}, 'no host'),
    ({'group': 'one'}, 'instance2: no host'),
    ({'instance1': {'host': 'node1', 'instance': 5}}, 'instance index 5 out of range'),
    ({'instance1': {'host': 'node1', 'instance': 'nope'}}, 'no instance named nope'),
    ({'instance2': {'host': 'node1'}}, 'are the same instance'),
])
def test_plan_errors_name_the_variable(settings, words):
    plan = _plan(settings, groups=dict(GROUPS, one=['node1']))
    assert any(words in e for e in plan['errors']), plan['errors']


def test_a_host_without_a_plan_is_named_with_the_fix():
    plan = _plan({}, hostvars=HOSTVARS)
    found = [e for e in plan['errors'] if 'vllm_instance_plan' in e]
    assert found, plan['errors']
    assert_names(found[0], 'node1 has no', 'vllm_instance_plan', 'benchmark.yml')
    assert _plan({'instance1': {'url': 'http://10.1.1.1:9000'}, 'instance2': {'url': 'http://10.1.1.2:9000'}},
                 hostvars=HOSTVARS)['errors'] == []


def test_plan_without_the_shared_defaults_is_refused_by_name():
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError) as exc:
        plan_filter.kvpool_benchmark_plan({'num_requests': 1}, HOSTVARS, GROUPS)
    assert_names(str(exc.value), 'settings.defaults lacks', 'node_group, master_group')


# --- the action plugin, through ansible-playbook on the controller ------------------------------------------------
def _play(tmp_path, results, check=False):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[4]
    (tmp_path / 'results.json').write_text(json.dumps({'bench_results': results}))
    (tmp_path / 'play.yml').write_text('''---
- name: Write a benchmark report
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Report
      ascend.kvpool.kvpool_benchmark_report:
        results: "{{ bench_results }}"
        report_dir: "%s/out"
        label: unit
        settings: {num_requests: 100, concurrency: 25, input_tokens: 1024}
      register: written
    - name: Show
      ansible.builtin.debug:
        msg: "{{ written.summary }}"
''' % tmp_path)
    argv = [str(Path(sys.executable).parent / 'ansible-playbook'), str(tmp_path / 'play.yml'), '-i', 'localhost,',
            '-e', '@%s' % (tmp_path / 'results.json')] + (['--check'] if check else [])
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo / 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    return subprocess.run(argv, cwd=str(repo), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)


def test_action_plugin_writes_json_markdown_and_png(tmp_path):
    pytest.importorskip('matplotlib')
    proc = _play(tmp_path, guide_run())
    assert proc.returncode == 0, proc.stdout
    out = tmp_path / 'out'
    report = json.loads((out / 'kvpool_benchmark.json').read_text())
    assert report['ok'] and report['label'] == 'SIMULATED (vllm stand-in) unit'
    assert report['files']['chart'].endswith('kvpool_benchmark.png')
    assert (out / 'kvpool_benchmark.png').read_bytes()[:4] == b'\x89PNG'
    assert '| this run (SIMULATED, builtin client), median | 100 | 25 | 2250.0 | 720.0 | 940.0 |' in \
        (out / 'kvpool_benchmark.md').read_text()
    assert_names(proc.stdout, 'KV pool TTFT benchmark', 'SIMULATED (vllm stand-in) unit', 'as in the guide')


def test_action_plugin_in_check_mode_without_traffic_writes_nothing(tmp_path):
    proc = _play(tmp_path, {'step1': {'check_mode': True, 'msg': 'check mode: would send'}}, check=True)
    assert proc.returncode == 0, proc.stdout
    assert not (tmp_path / 'out').exists()
    assert_names(proc.stdout, 'check mode: no report written (a run writes %s/out/kvpool_benchmark.{json,md,png})'
                 % tmp_path)


def test_action_plugin_in_check_mode_writes_nothing_even_after_real_traffic(tmp_path):
    """--check writes no report, also when the steps sent traffic (a step task with check_mode: false)."""
    proc = _play(tmp_path, guide_run(), check=True)
    assert proc.returncode == 0, proc.stdout
    assert not (tmp_path / 'out').exists()
    assert_names(proc.stdout, 'KV pool TTFT benchmark', 'check mode: no report written')


def with_server(run, step, mean, p50=None, p90=None, count=100):
    target = 'instance2' if step == 'step3' else 'instance1'
    run[step]['metrics'][target]['server_ttft'] = {'count': count, 'mean_ms': mean, 'p50_ms': p50, 'p90_ms': p90}
    return run


def test_server_ttft_is_shown_next_to_the_clients_and_a_gap_over_10_percent_is_flagged():
    run = guide_run()
    # client means are 1.05 x the medians: step1 2362.5, step2 756.0, step3 987.0 ms
    with_server(run, 'step1', 2250.0, 2200.0, 2900.0)     # +5.0%: not flagged
    with_server(run, 'step2', 756.0 / 1.14, 600.0, 900.0)  # +14%: flagged (the step-3 figure)
    report = bench_report.build_report(run, SETTINGS, generated='2026-11-29T18:00:00Z')
    steps = dict((s['id'], s) for s in report['steps'])
    assert steps['step1']['ttft_gap'] == 0.05 and steps['step2']['ttft_gap'] == 0.14
    assert steps['step3']['server_ttft'] is None and steps['step3']['ttft_gap'] is None
    assert [f['step'] for f in report['ttft_flags']] == ['step2']
    # a flag is about the measurement, not the pool: the run still passes
    assert report['ok'] and report['findings'] == []
    flag = report['ttft_flags'][0]
    assert flag['client_mean_ms'] == 756.0 and '+14.0%' in flag['message'] and 'instance1' in flag['message']
    flags = [line for line in report['summary'] if 'FLAG' in line]
    assert flags, report['summary']
    assert_names(flags[0], 'FLAG', 'client_server_ttft', 'TTFT2')
    assert_names(report['summary'][1], 'server TTFT', 'mean 2250.0', 'p50 2200.0', 'p90 2900.0', 'client +5.0%')
    assert 'server TTFT -' in report['summary'][4]
    markdown = bench_report.render_markdown(report)
    assert '| 2250.0 / 2200.0 / 2900.0 | +5.0% |' in markdown
    assert_names(markdown, '+14.0% **FLAG**', 'FLAG **client_server_ttft**', 'TTFT2')


def test_a_client_faster_than_the_server_is_flagged_too_and_nonsense_is_ignored():
    run = with_server(guide_run(), 'step1', 2362.5 * 1.2)
    with_server(run, 'step3', 'fast', None, None)
    report = bench_report.build_report(run, SETTINGS)
    assert [f['step'] for f in report['ttft_flags']] == ['step1'] and report['ttft_flags'][0]['gap'] < -0.1
    steps = dict((s['id'], s) for s in report['steps'])
    assert steps['step3']['server_ttft']['mean_ms'] is None and steps['step3']['ttft_gap'] is None


# --- the concurrency held, the client, a failed AISBench step ------------------------------------------------------
def held(res, achieved, requested=25, tool='builtin'):
    res['tool'] = tool
    res['summary']['concurrency'] = {'requested': requested, 'achieved': achieved, 'source': 'test'}
    return res


def test_the_concurrency_held_is_reported_and_far_below_the_asked_one_is_flagged():
    run = guide_run()
    # the AISBench figures: 19.5 in step 1, 7.7 and 8.0 in steps 2 and 3 (of 25)
    for sid, value in (('step1', 19.5), ('flush', 20.0), ('step2', 7.7276), ('step3', 8.0)):
        held(run[sid], value, tool='aisbench')
    report = bench_report.build_report(run, SETTINGS, generated='2026-12-05T18:00:00Z')
    steps = dict((s['id'], s) for s in report['steps'])
    assert steps['step2']['concurrency'] == {'requested': 25, 'achieved': 7.7276, 'ratio': 0.3091,
                                             'client': 'AISBench', 'source': 'test'}
    assert [f['step'] for f in report['concurrency_flags']] == ['step2', 'step3']
    assert report['concurrency_flags'][0]['ratio'] < bench_report.CONCURRENCY_FLOOR
    # about the load that was measured, not the pool: the run still passes
    assert report['ok'] and report['findings'] == []
    flags = [line for line in report['summary'] if 'low_concurrency' in line]
    assert len(flags) == 2
    assert_names(flags[0], 'FLAG', 'TTFT2', 'AISBench', '7.7', 'of the 25', 'lower load')
    assert_names(report['summary'][1], 'TTFT1', 'concurrency 19.5 held of 25', 'AISBench')
    markdown = bench_report.render_markdown(report)
    assert '| this run (SIMULATED, AISBench), median | 100 | 25 (held 19.5 / 7.7 / 8.0) | 2250.0 | 720.0 | 940.0 |' \
        in markdown.splitlines()
    assert_names(markdown, '| AISBench | 7.7 / 25 **FLAG** |', '| AISBench | 19.5 / 25 |',
                 'FLAG **low_concurrency**')
    # a reference row the guide measured is unchanged
    assert any(line.endswith('| 100 | 25 | 2322 | 739 | 948 |') for line in markdown.splitlines())


def test_a_step_with_fewer_requests_than_the_concurrency_is_held_to_its_request_count():
    run = guide_run()
    run['step1']['summary']['requests'] = 8
    held(run['step1'], 5.0)  # 8 requests at concurrency 25: at most 8 in flight; 5 of 8 is not far below
    report = bench_report.build_report(run, SETTINGS)
    assert report['steps'][0]['concurrency']['ratio'] == 0.625
    assert report['concurrency_flags'] == []


def test_a_failed_aisbench_step_carries_its_output_tail_in_the_summary_json_and_markdown():
    run = guide_run()
    tail = ['[ais_bench] log line %d' % n for n in range(19)] + ['OSError: Can\'t load tokenizer for \'\'']
    run['step2'] = {'failed': True, 'step': 'step2', 'tool': 'aisbench',
                    'msg': 'ais_bench failed (rc 1) on node1; its last 20 lines:\n' + '\n'.join(tail),
                    'aisbench': {'rc': 1, 'output_tail': tail, 'kept': False}}
    report = bench_report.build_report(run, SETTINGS)
    step2 = report['steps'][2]
    assert step2['status'] == 'error' and step2['output_tail'] == tail
    assert step2['error'] == 'ais_bench failed (rc 1) on node1; its last 20 lines:'
    assert json.loads(json.dumps(report))['steps'][2]['output_tail'] == tail
    text = '\n'.join(report['summary'])
    assert_names(text, 'TTFT2', 'ais_bench failed (rc 1) on node1', 'last 20 lines', "Can't load tokenizer",
                 'log line 0')
    markdown = bench_report.render_markdown(report)
    assert_names(markdown, 'AISBench output of the failed steps', "Can't load tokenizer", '| AISBench | |')


# --- the steps through the router (docs/router.md) ------------------------------------------------------------------
def routed(name, ttft_median, hits1, hits2, served=(32, 32)):
    res = result(name, ttft_median, hits1)
    res['metrics']['instance1'].update(hits=hits1, delta={'vllm:request_success_total{finished_reason="length"}':
                                                          float(served[0])})
    res['metrics']['instance2'].update(hits=hits2, delta={'vllm:request_success_total{finished_reason="length"}':
                                                          float(served[1])})
    return res


def test_routing_comparison_adds_up_both_instances_and_prints_the_ratios():
    results = guide_run()
    results['router'] = routed('router', 300.0, hits(ext_h=40000), hits(ext_h=50000))
    results['routing_rr'] = routed('routing_rr', 200.0, hits(1000, 300), hits(1000, 300))
    results['routing_policy'] = routed('routing_policy', 150.0, hits(1000, 800), hits(1000, 700), served=(40, 24))
    report = bench_report.build_report(results, dict(SETTINGS, router_policy='cache_aware'), label='SIMULATED x')
    comp = report['routing']['comparison']
    assert comp['device_hit_rate'] == {'round_robin': 0.3, 'policy': 0.75}
    assert comp['median_ttft_ratio'] == 0.75 and comp['device_hit_rate_ratio'] == 2.5 and comp['goal_met']
    text = '\n'.join(report['summary'])
    assert_names(text, 'cache_aware vs round robin', 'median TTFT x0.750', 'device hit rate x2.500')
    assert_names(text, 'served:', 'instance1 40', 'instance2 24')
    # the concurrency held through the router too; far below the asked one is flagged there as well
    held(results['routing_rr'], 7.5, requested=8)
    held(results['routing_policy'], 2.0, requested=8)
    report = bench_report.build_report(results, dict(SETTINGS, router_policy='cache_aware'))
    assert_names('\n'.join(report['summary']), 'concurrency 7.5 held of 8', 'concurrency 2.0 held of 8')
    assert [f['step'] for f in report['concurrency_flags']] == ['routing_policy']
    markdown = bench_report.render_markdown(report)
    assert '## Through the router' in markdown and '**met**' in markdown
    assert report['ok']  # the guide's checks are not touched by the router steps


def test_routing_goal_missed_and_steps_not_run():
    results = guide_run()
    results['routing_rr'] = routed('routing_rr', 150.0, hits(1000, 800), hits(1000, 800))
    results['routing_policy'] = routed('routing_policy', 200.0, hits(1000, 100), hits(1000, 100))
    report = bench_report.build_report(results, SETTINGS)
    assert report['routing']['comparison']['goal_met'] is False
    assert report['routing']['steps'][0]['status'] == 'not run'
    assert 'MISSED' in '\n'.join(report['summary'])
    assert bench_report.build_report(guide_run(), SETTINGS)['routing'] is None


def test_chart_with_the_router_steps(tmp_path):
    pytest.importorskip('matplotlib')
    results = guide_run()
    results['routing_rr'] = routed('routing_rr', 200.0, hits(1000, 300), hits(1000, 300))
    results['routing_policy'] = routed('routing_policy', 150.0, hits(1000, 800), hits(1000, 700))
    report = bench_report.build_report(results, SETTINGS)
    assert bench_report.render_chart(report, str(tmp_path / 'c.png')) is None
    assert (tmp_path / 'c.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
