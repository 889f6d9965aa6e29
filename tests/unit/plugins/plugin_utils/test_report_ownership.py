# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Report files replace only what the collection wrote (issue 32): JSON with written_by, Markdown with its header,
the PNG chart with its Software text; any other file at the path fails naming it and the variable."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.ascend.kvpool.plugins.action import kvpool_benchmark_report as benchmark_action
from ansible_collections.ascend.kvpool.plugins.action import vllm_instance_report as vllm_instance_action
from ansible_collections.ascend.kvpool.tests.unit.plugins.plugin_utils.report_actions import run_report_action
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

STEP = {'summary': {'ttft_ms': {'median': 10.0, 'p90': 12.0}, 'requests': 1, 'succeeded': 1, 'failed': 0},
        'metrics': {}}
STATUS_VARS = {'hostvars': {'node1': {'vllm_instance_status': []}}, 'ansible_play_hosts_all': ['node1']}


def run_benchmark(monkeypatch, tmp_path, check_mode=False, chart=True):
    from ansible_collections.ascend.kvpool.tests.unit.plugins.plugin_utils import report_actions
    monkeypatch.setattr(report_actions.FakeTask, 'check_mode', check_mode is not False, raising=False)
    step = dict(STEP, check_mode=True) if check_mode == 'no traffic' else STEP
    return run_report_action(monkeypatch, benchmark_action.ActionModule,
                             {'results': {'step1': step, 'step2': step, 'step3': step}, 'report_dir': str(tmp_path),
                              'basename': 'summary', 'chart': chart}, {})


@pytest.mark.parametrize('check_mode', [False, True, 'no traffic'])
def test_a_hand_written_markdown_at_the_reports_path_is_never_replaced(monkeypatch, tmp_path, check_mode):
    (tmp_path / 'summary.md').write_text('# my notes\n')
    with pytest.raises(AnsibleActionFail) as exc:
        run_benchmark(monkeypatch, tmp_path, check_mode=check_mode, chart=False)
    assert_names(str(exc.value), str(tmp_path / 'summary.md'), 'not written by ascend.kvpool', 'not replaced',
                 'kvpool_benchmark_report_dir', 'basename', 'Fix:')
    assert (tmp_path / 'summary.md').read_text() == '# my notes\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['summary.md']            # nothing else written either


def test_the_collections_own_report_files_are_replaced_with_their_proof(monkeypatch, tmp_path):
    pytest.importorskip('matplotlib')
    run_benchmark(monkeypatch, tmp_path)
    written = json.loads((tmp_path / 'summary.json').read_text())
    assert written['written_by'] == 'ascend.kvpool.kvpool_benchmark_report'
    assert (tmp_path / 'summary.md').read_text().startswith('<!-- Written by ascend.kvpool.kvpool_benchmark_report')
    assert b'Software\x00ascend.kvpool.kvpool_benchmark_report' in (tmp_path / 'summary.png').read_bytes()
    res = run_benchmark(monkeypatch, tmp_path)                                      # its own files: replaced
    assert sorted(res['files']) == ['chart', 'json', 'markdown']


@pytest.mark.parametrize('name, content', [('summary.png', b'\x89PNG\r\n\x1a\nnot ours'),
                                           ('summary.json', b'{"mine": 1}')])
def test_a_chart_or_json_without_the_proof_is_refused(monkeypatch, tmp_path, name, content):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(AnsibleActionFail) as exc:
        run_benchmark(monkeypatch, tmp_path)
    assert_names(str(exc.value), str(tmp_path / name), 'not replaced', 'kvpool_benchmark_report_dir')
    assert (tmp_path / name).read_bytes() == content


def test_a_json_report_path_holding_another_file_names_the_variable(monkeypatch, tmp_path):
    path = tmp_path / 'vllm.json'
    path.write_text('{"ok": true}\n')
    with pytest.raises(AnsibleActionFail) as exc:
        run_report_action(monkeypatch, vllm_instance_action.ActionModule, {'path': str(path)}, STATUS_VARS)
    assert_names(str(exc.value), str(path), '"written_by"', 'vllm_instance_report_path')
    assert path.read_text() == '{"ok": true}\n'
    path.unlink()                                                                  # absent: written, then its own
    for run in (1, 2):
        res = run_report_action(monkeypatch, vllm_instance_action.ActionModule, {'path': str(path)}, STATUS_VARS)
        assert res['path'] == str(path) and 'written_by' not in res, run
        assert json.loads(path.read_text())['written_by'] == 'ascend.kvpool.vllm_instance_report'


def test_reports_of_an_earlier_release_are_the_collections_by_their_layout(monkeypatch, tmp_path):
    """Before the proof: the action's own layout (its JSON keys, the Markdown's title line, the chart its JSON lists)
    is the collection's, as for the router's record; a hand-written file of another layout is not."""
    from ansible_collections.ascend.kvpool.plugins.plugin_utils import bench_report
    report = bench_report.build_report({'step1': STEP, 'step2': STEP, 'step3': STEP})
    report['files'] = {'json': str(tmp_path / 'summary.json'), 'markdown': str(tmp_path / 'summary.md'),
                       'chart': str(tmp_path / 'summary.png')}
    (tmp_path / 'summary.json').write_text(json.dumps(report))
    (tmp_path / 'summary.md').write_text(bench_report.render_markdown(report, 'summary.png'))
    (tmp_path / 'summary.png').write_bytes(b'\x89PNG\r\n\x1a\nmatplotlib of an earlier release')
    res = run_benchmark(monkeypatch, tmp_path, chart=True)
    assert res['files']['markdown'] == str(tmp_path / 'summary.md')
    assert json.loads((tmp_path / 'summary.json').read_text())['written_by'] == 'ascend.kvpool.kvpool_benchmark_report'
    path = tmp_path / 'vllm.json'
    path.write_text(json.dumps({'ok': True, 'instances': 0, 'healthy': 0, 'lines': [], 'problems': [],
                                'missing_hosts': [], 'status': {}}))
    run_report_action(monkeypatch, vllm_instance_action.ActionModule, {'path': str(path)}, STATUS_VARS)
    assert json.loads(path.read_text())['written_by'] == 'ascend.kvpool.vllm_instance_report'
