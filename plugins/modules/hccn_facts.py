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
version_added: 1.0.0
description:
  - Runs every read-only C(hccn_tool) query of the vLLM-Ascend multi-node guide (C(-lldp), C(-link),
    C(-net_health), C(-netdetect), C(-gateway), C(-ip), C(-tls), all with C(-g)) for a list of NPUs, and the
    physical-layer queries of the vllm-ascend KV pool guide and MindCluster's collectors, C(-optical -g) (the
    RoCE optical module, its presence, temperature, TX/RX power against the module's own thresholds, LOS/LOL
    alarms) and C(-link_stat -g) (link flaps since boot).
  - Also reads C(npu-smi info -t topo) and checks that every pair of NPUs of each of O(topology_groups) is
    connected as the node's model should be (Atlas 800T A2 / 910B, HCCS between every pair of the 8 NPUs).
  - All (device, query) pairs and the C(npu-smi) reads run concurrently in one fan-out, so a node of 8 NPUs
    answers in about the time of one query instead of the 72 sequential calls of the guides' shell loops.
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
    type: list
    elements: str
    description:
      - Which queries to run. C(optical) is C(hccn_tool -optical -g), C(link_stat) is C(hccn_tool -link_stat -g),
        C(topology) is C(npu-smi info -t topo) (needs C(npu-smi)).
    choices: [lldp, link, net_health, netdetect, gateway, ip, tls, optical, link_stat, topology]
    default: [lldp, link, net_health, netdetect, gateway, ip, tls, optical, link_stat, topology]
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
  link_flap_threshold:
    description:
      - The C(link_stat) check fails for an NPU whose link went down more than this many times since boot
        (C(link up count) and the C(LINK DOWN) records of C(hccn_tool -link_stat -g)).
    type: int
    default: 3
  topology_groups:
    description:
      - Groups of NPU ids (for example the NPUs of each vLLM instance); the C(topology) check judges every pair
        inside each group against the topology expected for the node's model.
      - When omitted, all queried NPUs form one group.
    type: list
    elements: list
  hccn_conf_path:
    description: The HCCN configuration file to parse and compare with the live addresses.
    type: path
    default: /etc/hccn.conf
  transient_wait:
    description:
      - Seconds to keep re-querying C(-net_health) of NPUs whose state is transient (C(Init), C(Detect ip set))
        before judging them. C(0) judges the first answer.
      - A finite number from C(0) to C(3600) (an hour); NaN, infinity and anything outside fail.
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
    description: Seconds after which one C(hccn_tool) or C(npu-smi) call is killed and reported as failed (at
      least 1).
    type: int
    default: 60
notes:
  - Device ids are bounded to 0-15 (an Atlas 800T A2 has 8 NPUs, A3 nodes 16).
  - The optical thresholds are the module's own (C(Temp High Thres), C(RxPower Low Thres), ...); a module that
    prints none is judged on presence and alarms only. Output formats and the expected topology per model, with
    their sources, are in C(docs/hccn-physical-formats.md) of the collection.
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
  sample: {"0": {switch: 0, raw: "dev_id:0, tls switch[0]..."}}
topology:
  description:
    - The C(npu-smi info -t topo) matrix and its judgement (empty when the C(topology) check is off).
  returned: always
  type: dict
  contains:
    family:
      description: Product family the expectation comes from (C(a2), C(a3), C(training), C(inference), C(generic)).
      type: str
    expected:
      description: The expected topology of that family, in words.
      type: str
    chip_name:
      description: The chip name of C(npu-smi info) the family was read from.
      type: str
    groups:
      description: The NPU groups whose pairs were checked.
      type: list
      elements: list
    links:
      description:
        - Per NPU id (string), per other NPU id, the link word (C(HCCS), C(HCCS_SW), C(SIO), C(PIX), C(SYS), ...).
      type: dict
  sample:
    family: a2
    groups: [[0, 1, 2, 3], [4, 5, 6, 7]]
    links: {"0": {"0": X, "1": HCCS}}
hccn_conf:
  description: The parsed HCCN configuration file and its comparison with the live addresses.
  returned: always
  type: dict
  contains:
    path:
      description: Path of the file.
      type: str
    present:
      description: Whether the file was read (it exists, is a regular file, readable, UTF-8, at most 1 MiB).
      type: bool
    error:
      description: Why the file could not be read (missing, a directory, a FIFO, unreadable, not UTF-8, too large).
      type: str
      returned: when the file could not be read
    devices:
      description: Per NPU id, the keys of the file (address, netmask, netdetect, gateway, ...).
      type: dict
    mismatches:
      description: NPUs whose C(address_<id>) is missing or differs from the live IP.
      type: list
      elements: dict
    warnings:
      description:
        - Lines hccn_tool reads differently from what they seem to say (it reads the file literally), each also a
          C(hccn_conf) finding. A duplicate key with another value (hccn_tool uses the first), CRLF line ends, and
          blanks around C(=).
      type: list
      elements: str
    errors:
      description: Lines without C(key=value), each also a C(hccn_conf) finding.
      type: list
      elements: str
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
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors
from ansible_collections.ascend.kvpool.plugins.module_utils import _hccn
from ansible_collections.ascend.kvpool.plugins.module_utils import _hccn_phys
from ansible_collections.ascend.kvpool.plugins.module_utils import _npu_smi
from ansible_collections.ascend.kvpool.plugins.module_utils import _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._runner import run_one, run_parallel
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import MAX_DEVICE_ID

HCCN_TOOL_DIRS = ['/usr/local/Ascend/driver/tools']
TRANSIENT_POLL = 0.25
MAX_TRANSIENT_WAIT = 3600  # seconds: an hour of re-querying transient states is already far past any boot
HCCN_QUERIES = _hccn.QUERIES + _hccn_phys.QUERIES
QUERY_NAMES = tuple(q[0] for q in HCCN_QUERIES)
CHECK_NAMES = QUERY_NAMES + ('topology',)


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
        ids = sorted(set(n['npu'] for n in listed.get('npus') or []))
        wrong = [i for i in ids if not 0 <= i <= MAX_DEVICE_ID]
        if wrong:
            message = ('npu-smi info -l lists NPU ids %s, outside 0-%d: not queried; run npu-smi info -l by hand, '
                       'or set devices' % (', '.join(str(i) for i in wrong), MAX_DEVICE_ID))
            findings.append({'npu': None, 'check': 'device', 'ok': False, 'state': 'error', 'message': message,
                             'raw': _hccn._first_line(res['stdout'], res['stderr'])})
            ids = [i for i in ids if 0 <= i <= MAX_DEVICE_ID]
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


def judge(check, res, flap_threshold):
    """Verdict of one hccn_tool answer, with its exit code and attempts."""
    if check in _hccn_phys.CHECKS:
        verdict = _hccn_phys.judge(check, res['rc'], res['stdout'], res['stderr'], flap_threshold)
    else:
        verdict = _hccn.judge(check, res['rc'], res['stdout'], res['stderr'])
    verdict['rc'] = res['rc']
    verdict['attempts'] = res['attempts']
    return verdict


def topology_result(res, info_res, groups):
    """The topology matrix of ``npu-smi info -t topo`` and the findings of the pairs of each group."""
    text = res['stdout'] + '\n' + res['stderr']
    drv = _npu_smi.driver_error(text)
    topo = _npu_smi.parse_topo(res['stdout'])
    chip = None
    if info_res is not None:
        npus = _npu_smi.parse_info(info_res['stdout']).get('npus') or []
        chip = npus[0].get('name') if npus else None
    out = {'family': None, 'expected': None, 'chip_name': chip, 'groups': groups, 'links': topo['links']}
    if drv:
        return out, []  # the driver finding of npu_health / discovery names it
    if not topo['links']:
        raw = _hccn._first_line(res['stderr'], res['stdout'])
        return out, [{'npu': None, 'check': 'topology', 'ok': False, 'state': 'error',
                      'message': 'npu-smi info -t topo gave no topology matrix (rc %s): %s'
                                 % (res['rc'], raw or 'no output'), 'raw': raw}]
    findings, family = _npu_smi.judge_topology(topo, groups, chip)
    out['family'] = family
    out['expected'] = _npu_smi.FAMILIES[family]
    return out, findings


def npu_health_findings(res, device_ids):
    """Findings from ``npu-smi info``: the driver, and the Health of the queried NPUs."""
    drv = _npu_smi.driver_error(res['stdout'] + '\n' + res['stderr'])
    if drv:
        return [{'npu': None, 'check': 'driver', 'ok': False, 'state': 'error',
                 'message': _npu_smi.driver_error_message(drv), 'raw': drv}]
    parsed = _npu_smi.parse_info(res['stdout'])
    raw = _hccn._first_line(res['stderr'], res['stdout'])
    problem = (_npu_smi.table_problem(res['stdout'], parsed) if res['rc'] == 0 else
               'npu-smi info failed with exit code %s: %s' % (res['rc'], raw))
    if problem:
        return [{'npu': None, 'check': 'npu_health', 'ok': False, 'state': 'error', 'message': problem,
                 'raw': raw}]
    shown = set(n['npu'] for n in parsed.get('npus') or [])
    out = [{'npu': d, 'check': 'npu_health', 'ok': False, 'state': 'error',
            'message': 'NPU %s is not in the table of npu-smi info: its health is unknown' % d, 'raw': None}
           for d in device_ids if d not in shown]
    for npu in parsed.get('npus') or []:
        if npu['npu'] in device_ids and not _npu_smi.judge_health(npu.get('health')):
            out.append({'npu': npu['npu'], 'check': 'npu_health', 'ok': False, 'state': 'fail',
                        'message': 'npu-smi Health is %s (only OK is healthy)' % npu.get('health'),
                        'raw': _npu_smi.health_row(res['stdout'], npu['npu'], npu.get('health'))})
    return out


def read_hccn_conf(path, live_ips):
    result = {'path': path, 'present': False, 'devices': {}, 'mismatches': [], 'errors': [], 'warnings': []}
    try:
        text = _validate.read_text_file(path)
    except _validate.FileProblem as e:
        result['error'] = str(e)
        result['missing'] = e.missing
        return result
    parsed = _hccn.parse_hccn_conf(text)
    result['present'] = True
    result['devices'] = dict((str(k), v) for k, v in parsed.get('devices', {}).items())
    result['errors'] = parsed.get('errors', [])
    result['warnings'] = parsed.get('warnings', [])
    # NPUs without a live IP are already reported by the ip check; compare the others.
    queried = dict((d, ip) for d, ip in live_ips.items() if ip)
    conf_for_queried = dict((d, v) for d, v in parsed.get('devices', {}).items() if d in queried)
    result['mismatches'] = _hccn.compare_conf_with_live(conf_for_queried, queried)
    return result


def hccn_conf_findings(conf):
    if not conf['present']:
        if conf.get('missing', True):
            message = '%s is missing: create it (and mount it into the vllm-ascend container)' % conf['path']
        else:
            message = conf.get('error')
        return [{'npu': None, 'check': 'hccn_conf', 'ok': False, 'state': 'fail', 'message': message,
                 'raw': conf.get('error')}]
    out = []
    # hccn_tool reads the file literally (the first of duplicate keys, CR and blanks as part of the value), so a
    # line it would read differently from what the operator meant is a fault, as is a line it cannot read at all.
    for warning in conf.get('warnings') or []:
        out.append({'npu': None, 'check': 'hccn_conf', 'ok': False, 'state': 'fail',
                    'message': '%s: %s; fix the file' % (conf['path'], warning), 'raw': None})
    for line in conf.get('errors') or []:
        out.append({'npu': None, 'check': 'hccn_conf', 'ok': False, 'state': 'fail',
                    'message': '%s: a line without key=value, which hccn_tool cannot read: %r; fix or remove it'
                               % (conf['path'], line[:120]), 'raw': line[:200]})
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
            checks=dict(type='list', elements='str', choices=list(CHECK_NAMES), default=list(CHECK_NAMES)),
            hccn_tool_path=dict(type='path'),
            npu_smi_path=dict(type='path'),
            npu_health=dict(type='bool', default=False),
            link_flap_threshold=dict(type='int', default=_hccn_phys.DEFAULT_FLAP_THRESHOLD),
            topology_groups=dict(type='list', elements='list'),
            hccn_conf_path=dict(type='path', default='/etc/hccn.conf'),
            transient_wait=dict(type='float', default=0),
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
    bad = [d for d in (p['devices'] or []) if d < 0 or d > MAX_DEVICE_ID]
    if bad:
        raise KvpoolError('devices: %s out of range 0-%d (hccn_tool -i takes the NPU physical id)'
                          % (', '.join(str(b) for b in bad), MAX_DEVICE_ID))
    if p['max_workers'] < 1:
        raise KvpoolError('max_workers must be at least 1, got %d' % p['max_workers'])
    if p['command_timeout'] < 1:
        raise KvpoolError('command_timeout must be at least 1 second, got %d (the bound of each hccn_tool and '
                          'npu-smi call)' % p['command_timeout'])
    if p['busy_retries'] < 0:
        raise KvpoolError('busy_retries must be 0 or more, got %s' % p['busy_retries'])
    # NaN compared below as never above 0 (no wait at all); infinity re-queried forever.
    _validate.number_range(p['transient_wait'], 'transient_wait', low=0, high=MAX_TRANSIENT_WAIT,
                           why='seconds of re-querying transient NPU states; the role\'s npu_network_transient_wait')
    if p['link_flap_threshold'] < 0:
        raise KvpoolError('link_flap_threshold must be 0 or more, got %d' % p['link_flap_threshold'])
    groups = None
    if p['topology_groups'] is not None:
        groups = []
        for group in p['topology_groups']:
            try:
                ids = sorted(set(int(n) for n in group))
            except (TypeError, ValueError) as exc:
                raise KvpoolError('topology_groups: %r is not a list of NPU ids (0-%d)'
                                  % (group, MAX_DEVICE_ID)) from exc
            if any(n < 0 or n > MAX_DEVICE_ID for n in ids):
                raise KvpoolError('topology_groups: %r has ids out of range 0-%d' % (group, MAX_DEVICE_ID))
            groups.append(ids)

    tool = p['hccn_tool_path'] or module.get_bin_path('hccn_tool', opt_dirs=HCCN_TOOL_DIRS)
    if not tool or not os.access(tool, os.X_OK):
        raise KvpoolError('hccn_tool not found on this host (looked on PATH and in %s); install the Ascend '
                          'driver tools or set hccn_tool_path' % ', '.join(HCCN_TOOL_DIRS),
                          result=dict(hccn_tool_path=p['hccn_tool_path']))

    started = time.monotonic()
    node_findings = []
    npu_smi = p['npu_smi_path'] or module.get_bin_path('npu-smi', opt_dirs=_npu_smi.SEARCH_DIRS)
    if p['devices']:
        device_ids = sorted(set(p['devices']))
    else:
        device_ids, node_findings = discover_devices(npu_smi, p['command_timeout'])
    if p['npu_health'] and not npu_smi:
        raise KvpoolError('npu_health needs npu-smi, which is not on this host (looked on PATH and in %s); '
                          'set npu_smi_path or npu_health: false' % ', '.join(_npu_smi.SEARCH_DIRS))

    checks = [c for c in QUERY_NAMES if c in p['checks']]
    argv_tail = dict(HCCN_QUERIES)
    pairs = [(d, c) for d in device_ids for c in checks]
    argvs = [[tool, '-i', str(d)] + list(argv_tail[c]) for d, c in pairs]
    topology_wanted = 'topology' in p['checks'] and bool(device_ids)
    if topology_wanted and not npu_smi:
        topology_wanted = False
        node_findings.append({'npu': None, 'check': 'topology', 'ok': False, 'state': 'error',
                              'message': 'the topology check needs npu-smi, which is not on this host (looked on '
                                         'PATH and in %s); set npu_smi_path or leave topology out of checks'
                                         % ', '.join(_npu_smi.SEARCH_DIRS), 'raw': None})
    info_wanted = (p['npu_health'] or topology_wanted) and bool(device_ids)
    # The npu-smi reads join the same fan-out: no second round of processes.
    if info_wanted:
        argvs.append([npu_smi, 'info'])
    if topology_wanted:
        argvs.append(_npu_smi.topo_command(npu_smi))
    results = run_parallel(argvs, max_workers=p['max_workers'], retry_if=_hccn.is_busy,
                           retries=p['busy_retries'], timeout=p['command_timeout'])
    topo_res = results.pop() if topology_wanted else None
    info_res = results.pop() if info_wanted else None
    if p['npu_health'] and info_res is not None:
        node_findings.extend(npu_health_findings(info_res, device_ids))
    topology = {}
    if topo_res is not None:
        topology, topo_findings = topology_result(topo_res, info_res, groups if groups is not None
                                                  else [list(device_ids)])
        node_findings.extend(topo_findings)

    devices = dict((str(d), {}) for d in device_ids)
    kinds = dict((d, set()) for d in device_ids)
    for (d, c), res in zip(pairs, results):
        devices[str(d)][c] = judge(c, res, p['link_flap_threshold'])
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
                devices[str(d)]['net_health'] = judge('net_health', res, p['link_flap_threshold'])

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

    return dict(
        changed=False,
        device_ids=device_ids,
        devices=devices,
        ips=ips,
        tls=tls,
        topology=topology,
        hccn_conf=conf,
        checks=all_findings,
        failed_checks=[f for f in all_findings if not f['ok']],
        hccn_tool_path=tool,
        elapsed_ms=round((time.monotonic() - started) * 1000.0, 1),
    )


if __name__ == '__main__':
    main()
