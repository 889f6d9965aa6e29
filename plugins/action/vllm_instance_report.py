# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of ascend.kvpool.vllm_instance_report: one summary of every vLLM instance of the play, written
as JSON on the controller, in the controller's own process (no module is shipped anywhere)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail

from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import ControllerReportAction, host_values
from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import report_line
from ansible_collections.ascend.kvpool.plugins.plugin_utils.vllm_plan import vllm_instance_summary


class ActionModule(ControllerReportAction):
    NAME = 'vllm_instance_report'
    ARGUMENT_SPEC = dict(
        status_var=dict(type='str', default='vllm_instance_status'),
        all_hosts=dict(type='list', elements='str'),
        label=dict(type='str', default=''),
        path=dict(type='path'),
        write_in_check_mode=dict(type='bool', default=False),
    )

    def report(self, result, args, task_vars):
        all_hosts = args['all_hosts']
        if all_hosts is None:
            all_hosts = task_vars.get('ansible_play_hosts_all', [])
        running = task_vars.get('ansible_play_hosts', all_hosts)
        status = host_values(task_vars['hostvars'], args['status_var'], all_hosts)
        wrong = sorted(h for h, v in status.items() if not isinstance(v, list)
                       or not all(isinstance(st, dict) for st in v))
        if wrong:
            raise AnsibleActionFail('%s of %s is not a list of instance statuses (the vllm_instance role sets it with '
                                    'the vllm_instance_status filter): set status_var to that fact'
                                    % (args['status_var'], ', '.join(wrong)))
        # Hosts with a status (with serial: the batches so far), then those that failed before they had one.
        order = [h for h in all_hosts if h in status] + [h for h in all_hosts if h not in status and h not in running]
        report = vllm_instance_summary(status, order, args['label'])
        if not status and all_hosts:
            # No host has a status: nothing was handled, which is not a healthy deployment.
            report.update(ok=False, lines=report['lines'] + [
                'no host of the play has %s: the instances were not handled in this play (skipped by tags or '
                'conditions?); run the vllm_instance role first' % args['status_var']])
        result.update(report)
        result.update(changed=False)
        if args['path']:
            result['path'] = self.write_report(args['path'], dict(report, status=status), 'vllm_instance_report_path')
            result['written'] = not self.check_mode
            result['report_line'] = report_line(result['path'], self.check_mode)
        return result
