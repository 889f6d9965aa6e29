#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hccn_facts
short_description: Query the RoCE network state of every NPU of an Ascend node with hccn_tool
version_added: 0.1.0
description:
  - Runs every read-only C(hccn_tool) query of the vLLM-Ascend multi-node guide (C(-lldp), C(-link),
    C(-net_health), C(-netdetect), C(-gateway), C(-ip), C(-tls), all with C(-g)) for a list of NPUs.
  - All (device, query) pairs run concurrently, so a node of 8 NPUs answers in about the time of one query
    instead of the 56 sequential calls of the guide's shell loops.
  - Each answer is judged from its text, not from the exit code (C(hccn_tool) exits 0 for a DOWN link or a
    C(Fault) health state). Answers C(hccn_tool is busy, please try again.) are retried.
  - Parses O(hccn_conf_path) and compares its C(address_<id>) entries with the live IP of each NPU.
  - Reads only; changes nothing on the node.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.read_only
options:
  devices:
    description:
      - NPU physical ids to query (C(hccn_tool -i <id>)).
      - When omitted, the NPUs are discovered with C(npu-smi info -l), then from C(/dev/davinci<N>) nodes.
    type: list
    elements: int
  checks:
    description: Which queries to run.
    type: list
    elements: str
    choices: [lldp, link, net_health, netdetect, gateway, ip, tls]
    default: [lldp, link, net_health, netdetect, gateway, ip, tls]
  hccn_tool_path:
    description:
      - Path of C(hccn_tool). When omitted it is searched on C(PATH) and in C(/usr/local/Ascend/driver/tools).
    type: path
  npu_smi_path:
    description:
      - Path of C(npu-smi), used to discover the NPUs when O(devices) is omitted and for O(npu_health).
    type: path
  npu_health:
    description:
      - Also read C(npu-smi info) in the same fan-out and report each queried NPU whose Health is not C(OK)
        (check C(npu_health)) and a driver that C(npu-smi) cannot open (check C(driver)).
      - Saves a separate M(ascend.kvpool.npu_smi_facts) round trip when only health matters.
    type: bool
    default: false
  hccn_conf_path:
    description: The HCCN configuration file to parse and compare with the live addresses.
    type: path
    default: /etc/hccn.conf
  transient_wait:
    description:
      - Seconds to keep re-querying C(-net_health) of NPUs whose state is transient (C(Init), C(Detect ip set))
        before judging them. C(0) judges the first answer.
    type: float
    default: 0
  max_workers:
    description: Maximum number of C(hccn_tool) processes run at once on the node.
    type: int
    default: 64
  busy_retries:
    description: How many times a query answered C(hccn_tool is busy) is retried (with a short backoff).
    type: int
    default: 5
  command_timeout:
    description: Seconds after which one C(hccn_tool) or C(npu-smi) call is killed and reported as failed.
    type: int
    default: 60
notes:
  - Device ids are bounded to 0-15 (an Atlas 800T A2 has 8 NPUs, A3 nodes 16).
seealso:
  - module: ascend.kvpool.hccn_ping
  - module: ascend.kvpool.npu_smi_facts
"""

EXAMPLES = r"""
- name: Query all NPUs of the node
  ascend.kvpool.hccn_facts:
  register: hccn

- name: Only the link and health of the first four NPUs
  ascend.kvpool.hccn_facts:
    devices: [0, 1, 2, 3]
    checks: [link, net_health]
  register: hccn

- name: Show what is wrong
  ansible.builtin.debug:
    msg: "{{ hccn.failed_checks | map(attribute='message') | list }}"
"""

RETURN = r"""
device_ids:
  description: The NPU ids that were queried.
  returned: always
  type: list
  elements: int
  sample: [0, 1, 2, 3, 4, 5, 6, 7]
devices:
  description:
    - Per NPU (keyed by id as a string), per query the verdict of the answer.
    - Each verdict has C(ok), C(state) (C(ok), C(fail), C(transient), C(busy), C(error)), C(message),
      C(raw) (the tool's own line), C(value) (the parsed answer) and C(rc).
  returned: always
  type: dict
  sample:
    "0":
      link: {ok: true, state: ok, message: link is UP, raw: "link status: UP", value: {status: UP}, rc: 0}
ips:
  description: Live IP address of each NPU (keyed by id as a string), null when none is set.
  returned: always
  type: dict
  sample: {"0": "29.1.1.80", "1": "29.1.1.81"}
tls:
  description:
    - TLS switch of each NPU (keyed by id as a string) and the raw line it was read from.
    - The guide requires the same value on all nodes.
  returned: always
  type: dict
  sample: {"0": {switch: 0, raw: "dev_id:0, tls switch[0](0:disable, 1:enable), ..."}}
hccn_conf:
  description: The parsed HCCN configuration file and its comparison with the live addresses.
  returned: always
  type: dict
  contains:
    path:
      description: Path of the file.
      type: str
    present:
      description: Whether the file exists.
      type: bool
    devices:
      description: Per NPU id, the keys of the file (address, netmask, netdetect, gateway, ...).
      type: dict
    mismatches:
      description: NPUs whose C(address_<id>) is missing or differs from the live IP.
      type: list
      elements: dict
checks:
  description:
    - Every verdict as a flat list of findings C({npu, check, ok, state, message, raw}).
    - Node-wide findings (driver not loaded, missing configuration file) have C(npu) null.
  returned: always
  type: list
  elements: dict
failed_checks:
  description: The findings of O(checks) that are not ok.
  returned: always
  type: list
  elements: dict
  sample:
    - {npu: 3, check: link, ok: false, state: fail, message: link is DOWN, raw: "link status: DOWN"}
elapsed_ms:
  description: Wall time of all queries, in milliseconds.
  returned: always
  type: float
"""

import glob
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _hccn
from ansible_collections.ascend.kvpool.plugins.module_utils import _npu_smi
from ansible_collections.ascend.kvpool.plugins.module_utils._runner import run_one, run_parallel

MAX_DEVICE_ID = 15
HCCN_TOOL_DIRS = ['/usr/local/Ascend/driver/tools']
TRANSIENT_POLL = 0.25
QUERY_NAMES = tuple(q[0] for q in _hccn.QUERIES)


def finding(npu, check, verdict):
    return {
        'npu': npu,
        'check': check,
        'ok': bool(verdict.get('ok')),
        'state': verdict.get('state'),
        'message': verdict.get('message'),
        'raw': verdict.get('raw'),
    }


def discover_devices(npu_smi_path, timeout):
    """Return (device ids, node-wide findings)."""
    findings = []
    if npu_smi_path:
        res = run_one([npu_smi_path, 'info', '-l'], timeout=timeout)
        text = res['stdout'] + '\n' + res['stderr']
        drv = _npu_smi.driver_error(text)
        if drv:
            findings.append({'npu': None, 'check': 'driver', 'ok': False, 'state': 'error',
                             'message': _npu_smi.driver_error_message(drv), 'raw': drv})
            return [], findings
        listed = _npu_smi.parse_list(res['stdout'])
        ids = sorted(n['npu'] for n in listed.get('npus') or [])
        if ids:
            return ids, findings
    nodes = []
    for path in glob.glob('/dev/davinci[0-9]*'):
        m = re.match(r'^/dev/davinci(\d+)$', path)
        if m:
            nodes.append(int(m.group(1)))
    if nodes:
        return sorted(nodes), findings
    findings.append({'npu': None, 'check': 'driver', 'ok': False, 'state': 'error',
                     'message': 'no NPU found (npu-smi lists none and there is no /dev/davinci<N>); '
                                'load the driver or set devices', 'raw': None})
    return [], findings


def npu_health_findings(res, device_ids):
    """Findings from ``npu-smi info``: the driver, and the Health of the queried NPUs."""
    drv = _npu_smi.driver_error(res['stdout'] + '\n' + res['stderr'])
    if drv:
        return [{'npu': None, 'check': 'driver', 'ok': False, 'state': 'error',
                 'message': _npu_smi.driver_error_message(drv), 'raw': drv}]
    out = []
    for npu in _npu_smi.parse_info(res['stdout']).get('npus') or []:
        if npu['npu'] in device_ids and not _npu_smi.judge_health(npu.get('health')):
            out.append({'npu': npu['npu'], 'check': 'npu_health', 'ok': False, 'state': 'fail',
                        'message': 'npu-smi Health is %s (only OK is healthy)' % npu.get('health'),
                        'raw': _npu_smi.health_row(res['stdout'], npu['npu'], npu.get('health'))})
    return out


def read_hccn_conf(path, live_ips):
    result = {'path': path, 'present': False, 'devices': {}, 'mismatches': [], 'errors': []}
    try:
        with open(path) as f:
            text = f.read()
    except (IOError, OSError) as e:
        result['error'] = '%s: %s' % (path, e.strerror or str(e))
        return result
    parsed = _hccn.parse_hccn_conf(text)
    result['present'] = True
    result['devices'] = dict((str(k), v) for k, v in parsed.get('devices', {}).items())
    result['errors'] = parsed.get('errors', [])
    # NPUs without a live IP are already reported by the ip check; compare the others.
    queried = dict((d, ip) for d, ip in live_ips.items() if ip)
    conf_for_queried = dict((d, v) for d, v in parsed.get('devices', {}).items() if d in queried)
    result['mismatches'] = _hccn.compare_conf_with_live(conf_for_queried, queried)
    return result


def hccn_conf_findings(conf):
    if not conf['present']:
        return [{'npu': None, 'check': 'hccn_conf', 'ok': False, 'state': 'fail',
                 'message': '%s is missing: create it (and mount it into the vllm-ascend container)' % conf['path'],
                 'raw': conf.get('error')}]
    out = []
    for mm in conf['mismatches']:
        dev = mm.get('device')
        entry = conf['devices'].get(str(dev), {})
        raw = 'address_%s=%s' % (dev, entry['address']) if entry.get('address') else None
        out.append({'npu': dev, 'check': 'hccn_conf', 'ok': False, 'state': 'fail',
                    'message': mm.get('message'), 'raw': raw})
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type='list', elements='int'),
            checks=dict(type='list', elements='str', choices=list(QUERY_NAMES), default=list(QUERY_NAMES)),
            hccn_tool_path=dict(type='path'),
            npu_smi_path=dict(type='path'),
            npu_health=dict(type='bool', default=False),
            hccn_conf_path=dict(type='path', default='/etc/hccn.conf'),
            transient_wait=dict(type='float', default=0),
            max_workers=dict(type='int', default=64),
            busy_retries=dict(type='int', default=5),
            command_timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    p = module.params
    bad = [d for d in (p['devices'] or []) if d < 0 or d > MAX_DEVICE_ID]
    if bad:
        module.fail_json(msg='devices: %s out of range 0-%d (hccn_tool -i takes the NPU physical id)'
                         % (', '.join(str(b) for b in bad), MAX_DEVICE_ID))
    if p['max_workers'] < 1:
        module.fail_json(msg='max_workers must be at least 1, got %d' % p['max_workers'])

    tool = p['hccn_tool_path'] or module.get_bin_path('hccn_tool', opt_dirs=HCCN_TOOL_DIRS)
    if not tool or not os.access(tool, os.X_OK):
        module.fail_json(msg='hccn_tool not found on this host (looked on PATH and in %s); install the Ascend '
                             'driver tools or set hccn_tool_path' % ', '.join(HCCN_TOOL_DIRS),
                         hccn_tool_path=p['hccn_tool_path'])

    started = time.monotonic()
    node_findings = []
    npu_smi = p['npu_smi_path'] or module.get_bin_path('npu-smi', opt_dirs=_npu_smi.SEARCH_DIRS)
    if p['devices']:
        device_ids = sorted(set(p['devices']))
    else:
        device_ids, node_findings = discover_devices(npu_smi, p['command_timeout'])
    if p['npu_health'] and not npu_smi:
        module.fail_json(msg='npu_health needs npu-smi, which is not on this host (looked on PATH and in %s); '
                             'set npu_smi_path or npu_health: false' % ', '.join(_npu_smi.SEARCH_DIRS))

    checks = [c for c in QUERY_NAMES if c in p['checks']]
    argv_tail = dict(_hccn.QUERIES)
    pairs = [(d, c) for d in device_ids for c in checks]
    argvs = [[tool, '-i', str(d)] + list(argv_tail[c]) for d, c in pairs]
    health_wanted = p['npu_health'] and bool(device_ids)
    if health_wanted:
        argvs.append([npu_smi, 'info'])
    results = run_parallel(argvs, max_workers=p['max_workers'], retry_if=_hccn.is_busy,
                           retries=p['busy_retries'], timeout=p['command_timeout'])
    if health_wanted:
        node_findings.extend(npu_health_findings(results.pop(), device_ids))

    devices = dict((str(d), {}) for d in device_ids)
    kinds = dict((d, set()) for d in device_ids)
    for (d, c), res in zip(pairs, results):
        verdict = _hccn.judge(c, res['rc'], res['stdout'], res['stderr'])
        verdict['rc'] = res['rc']
        verdict['attempts'] = res['attempts']
        devices[str(d)][c] = verdict
        kinds[d].add(_hccn.classify_error(res['rc'], res['stdout'], res['stderr']))

    if 'net_health' in checks and p['transient_wait'] > 0:
        deadline = time.monotonic() + p['transient_wait']
        while time.monotonic() < deadline:
            pending = [d for d in device_ids if devices[str(d)]['net_health'].get('state') == 'transient']
            if not pending:
                break
            time.sleep(TRANSIENT_POLL)
            again = run_parallel([[tool, '-i', str(d)] + list(argv_tail['net_health']) for d in pending],
                                 max_workers=p['max_workers'], retry_if=_hccn.is_busy, retries=p['busy_retries'],
                                 timeout=p['command_timeout'])
            for d, res in zip(pending, again):
                verdict = _hccn.judge('net_health', res['rc'], res['stdout'], res['stderr'])
                verdict['rc'] = res['rc']
                verdict['attempts'] = res['attempts']
                devices[str(d)]['net_health'] = verdict

    ips = {}
    tls = {}
    for d in device_ids:
        ip_verdict = devices[str(d)].get('ip') or {}
        ips[str(d)] = (ip_verdict.get('value') or {}).get('ipaddr')
        tls_verdict = devices[str(d)].get('tls') or {}
        tls[str(d)] = {'switch': (tls_verdict.get('value') or {}).get('switch'), 'raw': tls_verdict.get('raw')}

    all_findings = list(node_findings)
    for d in device_ids:
        first = devices[str(d)][checks[0]] if checks else {}
        if kinds[d] == set(['invalid_device']):
            # The tool does not know this NPU at all: one finding instead of one per query.
            all_findings.append({'npu': d, 'check': 'device', 'ok': False, 'state': 'error',
                                 'message': 'hccn_tool rejects NPU %s: invalid device id (no such NPU, or the '
                                            'driver is not loaded)' % d, 'raw': first.get('raw')})
            continue
        if kinds[d] == set(['busy']):
            all_findings.append({'npu': d, 'check': 'tool', 'ok': False, 'state': 'busy',
                                 'message': 'hccn_tool stayed busy for NPU %s after %d attempts per query'
                                            % (d, p['busy_retries'] + 1), 'raw': first.get('raw')})
            continue
        for c in checks:
            all_findings.append(finding(d, c, devices[str(d)][c]))

    conf = {'path': p['hccn_conf_path'], 'present': False, 'devices': {}, 'mismatches': []}
    if device_ids:
        live = dict((d, ips[str(d)]) for d in device_ids) if 'ip' in checks else {}
        conf = read_hccn_conf(p['hccn_conf_path'], live)
        all_findings.extend(hccn_conf_findings(conf))

    module.exit_json(
        changed=False,
        device_ids=device_ids,
        devices=devices,
        ips=ips,
        tls=tls,
        hccn_conf=conf,
        checks=all_findings,
        failed_checks=[f for f in all_findings if not f['ok']],
        hccn_tool_path=tool,
        elapsed_ms=round((time.monotonic() - started) * 1000.0, 1),
    )


if __name__ == '__main__':
    main()
