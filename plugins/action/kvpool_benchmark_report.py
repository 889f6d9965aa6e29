# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of ascend.kvpool.kvpool_benchmark_report: writes the benchmark report on the controller.

It runs in the controller's own Python (the one running ansible-playbook), whatever host the task targets, so
the PNG chart can use the controller's matplotlib and nothing is copied to a node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.ascend.kvpool.plugins.module_utils import _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.plugin_utils import bench_report
from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import (
    ControllerReportAction, check_ours, json_text, markdown_header, owned_json, png_metadata, report_line,
    write_atomic,
)

# What sets the report's paths, named when a file there is not the collection's.
PATH_VARIABLES = 'kvpool_benchmark_report_dir / basename (the role\'s kvpool_benchmark_report_dir)'


class ActionModule(ControllerReportAction):
    NAME = 'kvpool_benchmark_report'
    ARGUMENT_SPEC = dict(
        results=dict(type='dict', required=True),
        report_dir=dict(type='path', required=True),
        basename=dict(type='str', default='kvpool_benchmark'),
        label=dict(type='str', default=''),
        test_equipment=dict(type='str', default=''),
        settings=dict(type='dict', default={}),
        instances=dict(type='dict', default={}),
        chart=dict(type='bool', default=True),
    )

    def report(self, result, args, task_vars):
        report = bench_report.build_report(args['results'], args['settings'], args['instances'], args['label'],
                                           test_equipment=args['test_equipment'])
        result.update(changed=False, report=report, summary=report['summary'], ok=report['ok'], files={})
        # absolute, so the files listed and the check-mode line say where (a relative default is the current directory)
        report_dir = os.path.abspath(os.path.expanduser(args['report_dir']))
        try:
            _validate.path_component(args['basename'], 'basename')
        except KvpoolError as exc:
            raise AnsibleActionFail(str(exc)) from exc
        base = os.path.join(report_dir, args['basename'])
        files = {'json': base + '.json', 'markdown': base + '.md'}
        # No file is written unless every one already there is the collection's (the chart's too: checked
        # before matplotlib writes it), so a hand-written summary.md never goes, nor half of a report. Check mode
        # says the same: the real run would fail there.
        for kind, path in (('json', files['json']), ('markdown', files['markdown']), ('png', base + '.png')):
            if kind != 'png' or args['chart']:
                check_ours(path, kind, PATH_VARIABLES, self.NAME)
        if self.check_mode:
            # --check writes no report (a step that sent traffic all the same, check_mode: false, included)
            where = report_line(base + '.{json,md%s}'
                                % (',png' if args['chart'] else ''), True)
            result.update(msg=where, written=False, report_line=where, summary=report['summary'] + [where])
            return result
        try:
            if not os.path.isdir(report_dir):
                os.makedirs(report_dir)
            chart_note = None
            if args['chart']:
                files['chart'] = base + '.png'
                chart_note = bench_report.render_chart(report, files['chart'], metadata=png_metadata(self.NAME))
                if chart_note:
                    del files['chart']
                    result.setdefault('warnings', []).append(chart_note)
            report['files'] = dict(files)
            report['chart_note'] = chart_note
            write_atomic(files['markdown'], markdown_header(self.NAME) + bench_report.render_markdown(
                report, os.path.basename(files['chart']) if 'chart' in files else None))
            # NaN / Infinity as null; written_by only in the file
            write_atomic(files['json'], json_text(owned_json(report, self.NAME), default=to_text))
        except (IOError, OSError) as exc:
            raise AnsibleActionFail('cannot write the benchmark report under %s: %s (option report_dir; the role\'s '
                                    'kvpool_benchmark_report_dir): name a writable directory'
                                    % (report_dir, getattr(exc, 'strerror', None) or exc)) from exc
        result['files'] = files
        result['written'] = True
        result['report_line'] = report_line(', '.join(files[k] for k in sorted(files)), False)
        result['summary'] = report['summary'] + [result['report_line']]
        return result
