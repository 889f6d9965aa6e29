#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_instance_report
short_description: Summarise every vLLM instance of the play in one report on the controller
version_added: 1.0.0
description:
  - Reads each host's instance statuses (the host variable O(status_var), set by the role
    C(ascend.kvpool.vllm_instance) from M(ascend.kvpool.vllm_server)) and returns one summary with a line per
    instance (node, name, endpoint, health, NPUs, time to ready, what was done, what went wrong), plus a line
    for every host of the play that failed before its instances were handled.
  - Writes the summary and every status as JSON to O(path) on the controller. This is an action plugin, it runs
    in the controller's own process whatever host the task targets, and nothing is sent to a node.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.controller_report
options:
  status_var:
    description: Name of the host variable that holds each host's list of instance statuses.
    type: str
    default: vllm_instance_status
seealso:
  - module: ascend.kvpool.vllm_server
"""

EXAMPLES = r"""
- name: Summarise the instances of the play
  ascend.kvpool.vllm_instance_report:
    path: "{{ inventory_dir }}/reports/vllm_instances.json"
  run_once: true
  register: report

- name: Show it
  ansible.builtin.debug:
    msg: "{{ report.lines }}"
  run_once: true
"""

RETURN = r"""
ok:
  description: True when every instance is healthy (or stopped as wanted) and every host reported.
  returned: always
  type: bool
instances:
  description: Number of instances in the summary.
  returned: always
  type: int
healthy:
  description: Number of healthy instances.
  returned: always
  type: int
lines:
  description: The summary lines, first the totals, then one line per instance.
  returned: always
  type: list
  elements: str
  sample:
    - "vLLM instances: 2 instance(s) on 2 node(s): 2 healthy"
    - "node1  vllm-8002  http://172.31.250.11:8002      healthy    serves qwen, NPUs 0-3, ready in 20.4 s, started"
problems:
  description: The statuses of the instances that are neither healthy nor stopped as wanted, each with its C(node).
  returned: always
  type: list
  elements: dict
missing_hosts:
  description: Hosts of the play that failed or were unreachable before their instances were handled.
  returned: always
  type: list
  elements: str
path:
  description: Where the JSON report was written (absolute), or in check mode where a run writes it.
  returned: when O(path) is given
  type: str
written:
  description: Whether the report was written (false in check mode).
  returned: when O(path) is given
  type: bool
report_line:
  description: "The line that says where the report is: C(report: <path>); in check mode a line that starts with
    C(check mode: no report written) and names what a run writes."
  returned: when O(path) is given
  type: str
"""
