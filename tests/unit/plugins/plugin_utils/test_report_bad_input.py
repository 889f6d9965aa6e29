# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input to the benchmark report (docs/bad-input.md): results that are empty, skipped or not what
kvpool_benchmark returns, NaN figures, report paths that are directories or not file names. Each gives a finding
or a clear failure naming the option, never a traceback, a wrong success or a stray file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.ascend.kvpool.plugins.action import kvpool_benchmark_report as benchmark_action
from ansible_collections.ascend.kvpool.plugins.plugin_utils import bench_report
from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import write_atomic
from ansible_collections.ascend.kvpool.tests.unit.plugins.plugin_utils.report_actions import run_report_action


def test_no_step_ran_is_not_a_success():
    for results in ({}, {'step1': {'skipped': True}, 'step2': {'skipped': True}, 'step3': {'skipped': True}}):
        report = bench_report.build_report(results)
        assert not report['ok'] and [f['check'] for f in report['findings']] == ['no_step_ran']
        assert 'as in the guide' not in report['summary'][0]


def test_a_partial_run_says_so_instead_of_as_in_the_guide():
    ok_step = {'summary': {'ttft_ms': {'median': 10.0}, 'requests': 1, 'succeeded': 1, 'failed': 0},
               'metrics': {'instance1': {'hits': {'prefix_hits': 0, 'external_hits': 0}}}}
    report = bench_report.build_report({'step1': ok_step})
    assert report['ok'] and 'partial run' in report['summary'][0] and 'TTFT2, TTFT3' in report['summary'][0]


@pytest.mark.parametrize('bad', ['text', 3, ['a'], None, {'summary': 'x'}, {'summary': {'ttft_ms': 'x'}},
                                 {'summary': {'ttft_ms': {'median': float('nan')}}, 'metrics': {'i': 'x'}},
                                 {'summary': {'failed': 2, 'errors': 'x'}, 'metrics': []}])
def test_results_that_are_not_what_the_module_returns_give_findings_not_tracebacks(tmp_path, bad):
    report = bench_report.build_report({'step1': bad, 'step2': bad, 'step3': bad})
    assert isinstance(report['summary'], list) and bench_report.render_markdown(report)
    assert bench_report.render_chart(report, str(tmp_path / 'c.png')) in (None, 'no measured step: no chart')
    assert all(v is None or math.isfinite(v) for s in report['ttft_ms'].values() for v in s.values())


def test_a_nan_median_draws_the_chart_and_is_no_measurement(tmp_path):
    step = {'summary': {'ttft_ms': {'median': float('nan'), 'p90': float('inf')}, 'requests': 1, 'succeeded': 1,
                        'failed': 0}, 'metrics': {}}
    report = bench_report.build_report({'step1': step, 'step2': step, 'step3': step})
    assert report['ttft_ms']['step1']['median'] is None
    assert bench_report.render_chart(report, str(tmp_path / 'c.png')) is None and (tmp_path / 'c.png').exists()


def test_a_report_path_that_is_a_directory_fails_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / 'r.json'
    target.mkdir()
    with pytest.raises(OSError):
        write_atomic(str(target), 'x')
    assert sorted(os.listdir(str(tmp_path))) == ['r.json']


@pytest.mark.parametrize('basename', ['../x', '', '/tmp/x'])
def test_a_report_basename_that_is_not_a_file_name_is_refused(monkeypatch, tmp_path, basename):
    with pytest.raises(AnsibleActionFail, match='basename='):
        run_report_action(monkeypatch, benchmark_action.ActionModule,
                          {'results': {}, 'report_dir': str(tmp_path), 'basename': basename}, {})
    assert os.listdir(str(tmp_path)) == []


def test_a_report_dir_that_is_a_file_names_the_variable(monkeypatch, tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    step = {'summary': {'ttft_ms': {'median': 1.0}, 'requests': 1, 'succeeded': 1, 'failed': 0}, 'metrics': {}}
    with pytest.raises(AnsibleActionFail, match='kvpool_benchmark_report_dir'):
        run_report_action(monkeypatch, benchmark_action.ActionModule,
                          {'results': {'step1': step}, 'report_dir': str(blocker / 'r'), 'chart': False}, {})
