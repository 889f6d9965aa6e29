# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of ascend.kvpool.npu_network_report: merges every node's results into one report and writes it
as JSON on the controller, in the controller's own process (no module is shipped anywhere)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail

from ansible_collections.ascend.kvpool.plugins.plugin_utils.npu_network import node_result
from ansible_collections.ascend.kvpool.plugins.plugin_utils.npu_network import npu_network_report, ping_coverage
from ansible_collections.ascend.kvpool.plugins.plugin_utils.npu_network import ping_plan
from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import ControllerReportAction, host_values
from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import report_line


FACTS_KEYS = ('failed', 'msg', 'device_ids', 'failed_checks', 'tls', 'ips')
PING_KEYS = ('failed', 'msg', 'failed_pairs', 'results#')


class ActionModule(ControllerReportAction):
    NAME = 'npu_network_report'
    ARGUMENT_SPEC = dict(
        result_var=dict(type='str'),
        ping_var=dict(type='str', default='npu_network_ping'),
        hosts=dict(type='list', elements='str'),
        all_hosts=dict(type='list', elements='str'),
        label=dict(type='str', default=''),
        path=dict(type='path'),
        write_in_check_mode=dict(type='bool', default=False),
        ping_strategy=dict(type='str'),
        ping_sample_k=dict(type='int', default=2),
        ping_seed=dict(type='int', default=0),
        ping_round=dict(type='int', default=0),
        facts_var=dict(type='str', default='npu_network_hccn'),
        fail_on_error=dict(type='bool', default=False),
    )

    def report(self, result, args, task_vars):
        hosts = args['hosts'] if args['hosts'] is not None else task_vars.get('ansible_play_hosts', [])
        all_hosts = args['all_hosts']
        if all_hosts is None:
            all_hosts = task_vars.get('ansible_play_hosts_all', hosts)
        # Only what the report reads of each registered result (hccn_facts returns ~58 KB per node).
        facts = host_values(task_vars['hostvars'], args['facts_var'], hosts, FACTS_KEYS)
        # A merged result variable (result_var, or the earlier layout's npu_network_node_result) wins; otherwise
        # each node's result is built from its registered hccn_facts / hccn_ping results.
        merged = host_values(task_vars['hostvars'], args['result_var'] or 'npu_network_node_result', hosts)
        if args['result_var']:
            node_results = merged
        else:
            pings = host_values(task_vars['hostvars'], args['ping_var'], hosts, PING_KEYS)
            node_results = dict((host, merged[host] if host in merged else node_result(facts.get(host),
                                                                                       pings.get(host)))
                                for host in hosts)
        coverage = plan = None
        if args['ping_strategy']:
            ips = dict((host, (values.get('ips') if isinstance(values, dict) else None) or {})
                       for host, values in facts.items())
            # The plan the pings ran (the same rules as hccn_ping_targets): its coverage, and which pings passed,
            # so that the report can tell the suspect ports and links from their symptoms.
            strategy = (args['ping_strategy'], args['ping_sample_k'], args['ping_seed'], args['ping_round'])
            try:
                plan = ping_plan(ips, *strategy)
                coverage = ping_coverage(ips, *strategy, plan=plan)
            except ValueError as e:
                raise AnsibleActionFail(str(e)) from e
        report = npu_network_report(node_results, all_hosts, args['label'], coverage, plan)
        result.update(changed=False, report=report, ok=report['ok'], summary=report['summary'],
                      findings=report['findings'], coverage=report['coverage'])
        if args['path']:
            result['path'] = self.write_report(args['path'], report, 'npu_network_report_path')
            result['written'] = not self.check_mode
            result['report_line'] = report_line(result['path'], self.check_mode)
        if not report['ok']:
            # Judged here rather than by tasks after it: each task costs a play about 70 ms on every run.
            if args['fail_on_error']:
                where = [result['report_line']] if 'path' in result else []
                result.update(failed=True, msg='\n'.join(report['summary'] + where))
            else:
                result.setdefault('warnings', []).append(
                    '%d problem(s) found, listed in the summary; not failing (fail_on_error is false)'
                    % len(report['findings']))
        return result
