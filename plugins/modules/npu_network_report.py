#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: npu_network_report
short_description: Merge the NPU network findings of every node into one report on the controller
version_added: 1.0.0
description:
  - Reads each host's result variable (set by the role C(ascend.kvpool.npu_network) from
    M(ascend.kvpool.hccn_facts) and M(ascend.kvpool.hccn_ping)), adds the cross-node checks (TLS identical on all
    nodes, hosts that did not answer) and returns one report whose C(summary) names node, NPU, check and raw line
    of every problem.
  - Writes the report as JSON to O(path) on the controller. This is an action plugin, it runs in the controller's
    own process whatever host the task targets, and nothing is sent to a node.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.controller_report
options:
  result_var:
    description:
      - Name of a host variable that holds each node's results already merged (C(npus), C(errors), C(findings),
        C(tls), C(ping)).
      - Default (unset) takes C(npu_network_node_result) where a host has it (the layout of earlier releases), else
        builds them from each host's registered O(facts_var) and O(ping_var) results, so the role needs no task per
        host for it.
    type: str
  ping_var:
    description: Name of the host variable that holds each node's registered M(ascend.kvpool.hccn_ping) result.
    type: str
    default: npu_network_ping
  hosts:
    description: Hosts whose results are merged; default the hosts of the play that are still running.
    type: list
    elements: str
  ping_strategy:
    description:
      - >-
        The ping plan of the run (C(same_index), C(ring), C(sampled), C(full_mesh), C(none)); when set, the
        summary's second line states its coverage, for example
        C(ping plan ring: 512 of 129,024 cross-node NPU pairs; every port pinged at least once), and the report
        holds it as C(coverage).
      - >-
        The plan is derived again from each host's O(facts_var) C(ips), with the same rules as the pings. It also
        tells which pings passed, so that the failed ones are localized: the summary names the suspect ports and
        links first, each with the failed pings it explains (RV(report) keeps every one as a finding), then the
        rest (docs/network.md, "Suspects").
    type: str
  ping_sample_k:
    description: C(sampled) only, the peers each port pings (the role's C(npu_network_ping_sample_k)).
    type: int
    default: 2
  ping_seed:
    description: C(sampled) only, the seed of the peer order.
    type: int
    default: 0
  ping_round:
    description: C(sampled) only, the rotation round the pings used.
    type: int
    default: 0
  fail_on_error:
    description:
      - When true and the report is not C(ok), the task fails after writing the report, with the summary lines
        (and the report's path) as its message.
      - When false, a report that is not C(ok) gives a warning and the task succeeds; the play reads RV(ok).
    type: bool
    default: false
  facts_var:
    description: Name of the host variable that holds each node's registered M(ascend.kvpool.hccn_facts) result
      (its findings, and the C(ips) the ping plan is derived from).
    type: str
    default: npu_network_hccn
seealso:
  - module: ascend.kvpool.hccn_facts
  - module: ascend.kvpool.hccn_ping
"""

EXAMPLES = r"""
- name: Merge the findings of the play
  ascend.kvpool.npu_network_report:
    path: "{{ inventory_dir }}/reports/npu_network.json"
  run_once: true
  register: report
"""

RETURN = r"""
ok:
  description: True when nothing is wrong.
  returned: always
  type: bool
report:
  description:
    - The report (C(ok), C(label), C(nodes), C(npus_checked), C(pings), C(findings), C(suspects), C(links),
      C(coverage), C(summary)).
    - >-
      A failed ping's finding names both ends, in its message (C(ping node1/npu3 -> node2/npu3 ...)); C(node) and
      C(npu) are the sender's, C(peer) the target port. A finding that a suspect's or link's summary line explains
      has C(explained_by), that suspect's C(port) or the link's C(name).
    - >-
      C(suspects) (with O(ping_strategy)): the ports the failed pings point at, each with C(kind) (C(port): every
      known ping through it failed while a peer's other pings passed, or its link's checks failed too; C(partial):
      some of its pings failed, to 2 or more peers whose other pings passed, or to one when its link's checks
      failed), C(port), C(node), C(npu), C(failed), C(through) (known pings sent or answered), C(failed_from),
      C(failed_to), C(peers), C(checks) (its link's failed checks, joined to its line) and C(unconfirmed_peers).
    - >-
      C(links): C(kind) C(link) (failed pings between two ports whose other pings passed) or C(undecided) (ports
      whose every ping failed, between them, with no other ping to tell which is bad), C(name) (C(a <-> b); a larger
      undecided group by its first port and its size), C(ports), C(failed), C(through), C(checks).
    - C(coverage) (null without O(ping_strategy)) has C(strategy), C(pings), C(pairs) (distinct cross-node NPU
      pairs pinged), C(total_pairs), C(ports), C(ports_pinged), C(not_pinged) (C(node/npuN) of ports with an IP that
      no ping reached), and for C(sampled) C(k), C(seed), C(round) and C(full_cycle) (rounds until every same-index
      pair was pinged).
  returned: always
  type: dict
summary:
  description: The summary lines, first the totals, then the ping plan's coverage (with O(ping_strategy)), then one
    line per suspect node, port, undecided group and link (with O(ping_strategy)), then one line per other finding.
  returned: always
  type: list
  elements: str
  sample:
    - "NPU network verification: 6 node(s), 48 NPU(s), 48 cross-node ping(s): 4 problem(s): 1 suspect port, 1 other"
    - "ping plan ring: 48 of 960 cross-node NPU pairs; every port pinged at least once"
    - "suspect port node4/npu5: 2 of 2 pings through it failed (1 from it, 1 to it); its 2 peers' other pings passed;
      also failed here: link: link is DOWN (raw: link status: DOWN) | e.g. ping node4/npu5 -> node5/npu5
      (29.1.5.85): Command execute failed!"
    - "node2      npu3   optical          ..."
findings:
  description: The report's C(findings) (each with C(node), C(npu), C(check), C(message), C(raw); a failed ping's
    with C(peer); one that a suspect's line explains with C(explained_by)), as in RV(report).
  returned: always
  type: list
  elements: dict
coverage:
  description: The report's C(coverage), as in RV(report); null without O(ping_strategy).
  returned: always
  type: dict
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
