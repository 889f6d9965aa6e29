# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of ascend.kvpool.vllm_instance_report: one summary of every vLLM instance of the play, written
as JSON on the controller, in the controller's own process (no module is shipped anywhere)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.plugin_utils.vllm_plan import vllm_instance_summary
from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import ControllerReportAction, host_values


class ActionModule(ControllerReportAction):
    ARGUMENT_SPEC = dict(
        status_var=dict(type='str', default='vllm_instance_status'),
        all_hosts=dict(type='list', elements='str'),
        label=dict(type='str', default=''),
        path=dict(type='path'),
    )

    def report(self, result, args, task_vars):
        all_hosts = args['all_hosts']
        if all_hosts is None:
            all_hosts = task_vars.get('ansible_play_hosts_all', [])
        running = task_vars.get('ansible_play_hosts', all_hosts)
        status = host_values(task_vars['hostvars'], args['status_var'], all_hosts)
        # Hosts with a status (with serial: the batches so far), then those that failed before they had one.
        order = [h for h in all_hosts if h in status] + [h for h in all_hosts if h not in status and h not in running]
        report = vllm_instance_summary(status, order, args['label'])
        result.update(report)
        result.update(changed=False)
        if args['path']:
            result['path'] = self.write_report(args['path'], dict(report, status=status), 'vllm_instance_report_path')
        return result
