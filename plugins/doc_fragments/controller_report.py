# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Attributes and options of the action plugins that merge host variables into one JSON report on the
    controller (npu_network_report, vllm_instance_report)."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description:
      - Reads host variables only. In check mode (C(--check), also on a task with C(check_mode=false)) no report is
        written (unless O(write_in_check_mode)); the result says where a run writes it (C(path), C(written),
        C(report_line)).
  diff_mode:
    support: none
    description: Nothing on a node changes.
  idempotent:
    support: full
    description: The same host variables give the same report.
options:
  label:
    description: Free text shown in the summary and stored in the report.
    type: str
    default: ""
  path:
    description:
      - Controller path of the JSON report; not written when omitted.
      - The report carries the top-level key C(written_by) (C(ascend.kvpool.<action>)). A file already at the path
        is replaced only when it has that key (or is a report of the same action of an earlier release, by its
        layout); any other file (hand-written, a link, a FIFO) fails the task naming it, in check mode too, and stays
        as it was.
    type: path
  write_in_check_mode:
    description:
      - Write the report in check mode too (then it holds what the check saw or predicts). By default check mode
        writes no report and the result says where a run writes it.
    type: bool
    default: false
  all_hosts:
    description:
      - Every host the play started with, in report order; default C(ansible_play_hosts_all).
      - A host without results that is no longer in the play is reported as not answering (unreachable, or failed
        before its results were set).
    type: list
    elements: str
"""
