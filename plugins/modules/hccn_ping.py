#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hccn_ping
short_description: Ping remote NPU addresses from local NPUs over RoCE with hccn_tool
version_added: 1.0.0
description:
  - Runs C(hccn_tool -i <device> -ping -g address <address>) for a list of (local device, remote address) pairs,
    as the guide's cross-node ping test does by hand.
  - Pairs of different local devices run concurrently; the pings of one device run one after another
    (O(per_device_concurrency)) so that the tool is not made busy by its own calls.
  - Each pair is judged from the text (C(3 packets transmitted, 3 received)); C(recv time out),
    C(Destination Host Unreachable), C(Message too long) and C(Command execute failed!) count as failures.
  - Reads only; changes nothing on the node.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.read_only
options:
  targets:
    description: The pairs to ping.
    type: list
    elements: dict
    required: true
    suboptions:
      device:
        description: Local NPU physical id that sends the ping (0-15).
        type: int
        required: true
      address:
        description: Remote NPU IP address (dotted-quad IPv4; anything else fails the task naming the target).
        type: str
        required: true
      label:
        description: Free text naming the target (for example C(node2/npu3)), copied to the result.
        type: str
  pkt:
    description: Payload size in bytes (C(pkt) argument of hccn_tool, 1-65507); the tool's default (4096) when
      omitted.
    type: int
  hccn_tool_path:
    description: Path of C(hccn_tool); searched on C(PATH) and in C(/usr/local/Ascend/driver/tools) when omitted.
    type: path
  per_device_concurrency:
    description: How many pings one local device runs at once.
    type: int
    default: 1
  max_workers:
    description: Maximum number of C(hccn_tool) processes run at once on the node.
    type: int
    default: 64
  busy_retries:
    description: How many times a ping answered C(hccn_tool is busy) is retried.
    type: int
    default: 5
  command_timeout:
    description: Seconds after which one ping is killed and reported as failed (at least 1).
    type: int
    default: 60
seealso:
  - module: ascend.kvpool.hccn_facts
"""

EXAMPLES = r"""
- name: NPU i of this node pings NPU i of node2
  ascend.kvpool.hccn_ping:
    targets:
      - {device: 0, address: 29.1.2.80, label: node2/npu0}
      - {device: 1, address: 29.1.2.81, label: node2/npu1}
  register: ping

- name: Fail on any loss
  ansible.builtin.assert:
    that: ping.failed_pairs | length == 0
    fail_msg: "{{ ping.failed_pairs | map(attribute='message') | list }}"
"""

RETURN = r"""
results:
  description: One entry per target pair, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: Local NPU id.
      type: int
    address:
      description: Remote address.
      type: str
    label:
      description: The label given with the target.
      type: str
    ok:
      description: All packets came back and no failure marker was printed.
      type: bool
    transmitted:
      description: Packets sent.
      type: int
    received:
      description: Packets received.
      type: int
    loss_pct:
      description: Packet loss in percent.
      type: float
    rtt_avg_ms:
      description: Mean round trip time of the received packets, in milliseconds.
      type: float
    message:
      description: Human summary of the pair.
      type: str
    raw:
      description: The tool's own line that decides the verdict.
      type: str
  sample:
    - {device: 3, address: 29.1.2.83, label: node2/npu3, ok: false, transmitted: 3, received: 2,
       loss_pct: 33.33, rtt_avg_ms: 0.08, message: "33.33% packet loss",
       raw: "3 packets transmitted, 2 received, 33.33% packet loss"}
failed_pairs:
  description: The entries of RV(results) that are not ok.
  returned: always
  type: list
  elements: dict
elapsed_ms:
  description: Wall time of all pings, in milliseconds.
  returned: always
  type: float
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors
from ansible_collections.ascend.kvpool.plugins.module_utils import _hccn
from ansible_collections.ascend.kvpool.plugins.module_utils import _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._runner import run_parallel
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import MAX_DEVICE_ID

HCCN_TOOL_DIRS = ['/usr/local/Ascend/driver/tools']


MAX_PKT = 65507  # the largest payload of one IPv4 datagram; hccn_tool's own limit may be lower


def check_params(p):
    """What the argument spec cannot say, in one place; raises KvpoolError naming the option."""
    if p['per_device_concurrency'] < 1 or p['max_workers'] < 1:
        raise KvpoolError('per_device_concurrency and max_workers must be at least 1')
    _validate.int_range(p['command_timeout'], 'command_timeout', 1, 86400, 'seconds per ping')
    _validate.int_range(p['busy_retries'], 'busy_retries', 0, 1000)
    if p['pkt'] is not None:
        _validate.int_range(p['pkt'], 'pkt', 1, MAX_PKT, 'payload bytes; omit it for the tool\'s 4096')
    for index, target in enumerate(p['targets']):
        where = 'targets[%d]%s' % (index, ' (%s)' % target['label'] if target.get('label') else '')
        _validate.int_range(target['device'], where + '.device', 0, MAX_DEVICE_ID, 'the local NPU physical id')
        _validate.ipv4_address(target['address'], where + '.address')


def ping_argv(tool, target, pkt):
    argv = [tool, '-i', str(target['device']), '-ping', '-g', 'address', target['address']]
    if pkt:
        argv += ['pkt', str(pkt)]
    return argv


def pick_raw(stdout, stderr):
    """The line that decides: the summary line, else the first error line."""
    for line in (stdout or '').splitlines():
        if 'packets transmitted' in line:
            return line.strip()
    for text in (stderr, stdout):
        for line in (text or '').splitlines():
            if line.strip():
                return line.strip()
    return None


def judge_pair(target, res):
    parsed = _hccn.parse_ping(res['rc'], res['stdout'], res['stderr'])
    entry = {
        'device': target['device'],
        'address': target['address'],
        'label': target.get('label'),
        'ok': bool(parsed.get('ok')),
        'transmitted': parsed.get('transmitted'),
        'received': parsed.get('received'),
        'loss_pct': parsed.get('loss_pct'),
        'rtt_avg_ms': parsed.get('rtt_avg_ms'),
        'rtt_ms': parsed.get('rtt_ms'),
        'rc': res['rc'],
        'attempts': res['attempts'],
        'raw': pick_raw(res['stdout'], res['stderr']),
    }
    if entry['ok']:
        entry['message'] = '%s received of %s' % (entry['received'], entry['transmitted'])
    elif parsed.get('error'):
        entry['message'] = parsed['error']
    else:
        entry['message'] = '%s%% packet loss' % (entry['loss_pct'],)
    return entry


def main():
    module = AnsibleModule(
        argument_spec=dict(
            targets=dict(type='list', elements='dict', required=True, options=dict(
                device=dict(type='int', required=True),
                address=dict(type='str', required=True),
                label=dict(type='str'),
            )),
            pkt=dict(type='int'),
            hccn_tool_path=dict(type='path'),
            per_device_concurrency=dict(type='int', default=1),
            max_workers=dict(type='int', default=64),
            busy_retries=dict(type='int', default=5),
            command_timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    """The module's work: returns its result or raises KvpoolError; main() answers the task with either."""
    p = module.params
    check_params(p)  # a KvpoolError fails the task with its message (main())
    tool = p['hccn_tool_path'] or module.get_bin_path('hccn_tool', opt_dirs=HCCN_TOOL_DIRS)
    if not tool or not os.access(tool, os.X_OK):
        raise KvpoolError('hccn_tool not found on this host (looked on PATH and in %s); install the Ascend '
                          'driver tools or set hccn_tool_path' % ', '.join(HCCN_TOOL_DIRS))

    started = time.monotonic()
    targets = p['targets']
    # One lane per (device, slot): pings of one device are spread over per_device_concurrency lanes
    # that each run their share one after another; lanes run concurrently.
    lanes = {}
    for idx, t in enumerate(targets):
        key = (t['device'], idx % p['per_device_concurrency'])
        lanes.setdefault(key, []).append(idx)

    results = [None] * len(targets)

    def run_lane(indexes):
        answers = run_parallel([ping_argv(tool, targets[i], p['pkt']) for i in indexes],
                               max_workers=1, retry_if=_hccn.is_busy, retries=p['busy_retries'],
                               timeout=p['command_timeout'])
        for i, res in zip(indexes, answers):
            results[i] = judge_pair(targets[i], res)

    if lanes:
        with ThreadPoolExecutor(max_workers=max(1, min(p['max_workers'], len(lanes)))) as pool:
            for f in [pool.submit(run_lane, idx) for idx in lanes.values()]:
                f.result()

    return dict(
        changed=False,
        results=results,
        failed_pairs=[r for r in results if not r['ok']],
        elapsed_ms=round((time.monotonic() - started) * 1000.0, 1),
    )


if __name__ == '__main__':
    main()
