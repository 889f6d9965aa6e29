#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_server
short_description: Run one C(vllm serve) process as a detached, health-gated instance
version_added: 0.1.0
description:
  - Starts, stops or restarts one C(vllm serve) process (a vLLM-Ascend instance), on the host or inside a running
    container (the vLLM-Ascend guide runs it in the C(vllm-ascend) container started with C(--net=host)).
  - The command line is built from structured parameters (model, served name, dtype, max model length, tensor
    parallel size, host, port, max batched tokens, memory utilization, C(--kv-transfer-config) from a dict) plus
    O(extra_args); the environment from O(env), O(visible_devices) and O(path_prepend).
  - The process runs detached in its own session with a pid file, a log file and a settings file under
    C(<state_dir>/<name>/). The settings file records the effective command line, environment and their
    fingerprint (sha256), the pid and the process start time (so a reused pid is never mistaken for it).
  - Idempotent. A process running with the same fingerprint and passing the health gate is left alone (C(ok)).
    A different fingerprint restarts it (C(changed), with a diff). A dead process is started; a live one that stays
    unhealthy for O(ready_timeout) is restarted.
  - The health gate is C(GET /health) answering 200 and C(GET /v1/models) listing the served model name (sent with
    O(api_key) as a bearer token when set), polled every O(poll_interval) seconds for at most O(ready_timeout)
    seconds. A start that fails (the process exits, or is not healthy in time) stops what is left of it and fails
    the task with the tail of its log.
  - With O(wait=false) the task returns as soon as the process is launched. A later task with O(wait=true) and the
    same parameters then waits for that start, and reports its failure with the log tail instead of starting it
    again. This lets a play launch every instance of a host first and then wait for all of them, so the waits
    overlap.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
attributes:
  check_mode:
    support: full
    description: Reports whether the instance would be started, restarted or stopped (with the diff), and changes
      nothing. The health of a running instance is still polled, which only reads.
  diff_mode:
    support: full
    description: The effective command line and environment before and after, one flag or variable per line.
  idempotent:
    support: full
    description: O(state=restarted) always restarts; the other states change nothing when nothing differs.
options:
  state:
    description:
      - C(started) makes sure the instance runs with these settings and passes the health gate.
      - C(stopped) stops the instance started by this module (SIGTERM to its process group, SIGKILL after
        O(stop_timeout)).
      - C(restarted) always restarts it.
    type: str
    choices: [started, stopped, restarted]
    default: started
  name:
    description:
      - Name of the instance on this host (letters, digits, C(.), C(_), C(-)). Names its state directory; two
        instances of one host need two names.
    type: str
    required: true
  model:
    description: Model path or name, the positional argument of C(vllm serve). Required unless O(state=stopped).
    type: str
  served_model_name:
    description:
      - C(--served-model-name). The health gate waits until C(/v1/models) lists it (vLLM lists the model path when
        it is unset).
    type: str
  dtype:
    description: C(--dtype) (the guide uses C(bfloat16)).
    type: str
  max_model_len:
    description: C(--max-model-len).
    type: int
  tensor_parallel_size:
    description:
      - C(--tensor-parallel-size). When O(visible_devices) is given it must match their number.
    type: int
  host:
    description: C(--host), the address the API server binds to.
    type: str
  port:
    description: C(--port) of the API server. Required unless O(state=stopped).
    type: int
  max_num_batched_tokens:
    description: C(--max-num-batched-tokens).
    type: int
  gpu_memory_utilization:
    description: C(--gpu-memory-utilization), the share of NPU memory vLLM may use (0 to 1).
    type: float
  kv_transfer_config:
    description:
      - C(--kv-transfer-config) as a dict, passed as compact JSON with sorted keys
        (for example C(kv_connector), C(kv_role), C(kv_connector_extra_config)).
    type: dict
  extra_args:
    description: More C(vllm serve) arguments, appended as given (one argument per item); not C(--api-key).
    type: list
    elements: str
    default: []
  env:
    description:
      - Environment of the process (for example C(MOONCAKE_CONFIG_PATH), C(PYTHONHASHSEED), C(VLLM_HOST_IP)).
      - Part of the fingerprint; a change restarts the instance.
      - Not C(VLLM_API_KEY) (use O(api_key)).
    type: dict
    default: {}
  api_key:
    description:
      - API key the instance requires on C(/v1/*) (vLLM's C(VLLM_API_KEY); C(/health) and C(/metrics) stay open).
      - Handed to the process through its environment, never its command line (which every user of the host can
        read with C(ps)), and not returned. The settings file records only a salted sha256 digest of it, so a new
        key restarts the instance (the diff shows C(VLLM_API_KEY=<secret, ...>)) and the same key changes nothing.
      - Unset or empty runs the instance without a key. C(--api-key) in O(extra_args) is refused.
    type: str
  visible_devices:
    description:
      - NPU ids the instance may use, set as C(ASCEND_RT_VISIBLE_DEVICES). Their number must equal
        O(tensor_parallel_size) when that is set.
    type: list
    elements: int
  path_prepend:
    description:
      - Variables whose value is prepended (colon-separated) to the value the process would inherit. The guide
        prepends C(/usr/local/Ascend/ascend-toolkit/latest/python/site-packages) to C(LD_LIBRARY_PATH).
      - Inside a container the inherited value is the image's, which must be kept.
      - A dict of variable name to a list of directories.
    type: dict
    default: {}
  binary:
    description:
      - The C(vllm) executable. A bare name is searched on C(PATH) of the host or container, then in
        C(/usr/local/bin) and C(/usr/local/python3*/bin).
    type: str
    default: vllm
  container:
    description:
      - Name of a running docker container to run the instance in (C(docker exec)). Unset runs it on the host.
      - The health polls run from the host, so the container must share the host network (C(--net=host)).
    type: str
  state_dir:
    description: Directory (on the host, or in the container) under which C(<name>/) holds the pid, log and settings.
    type: path
    default: /var/lib/ascend-kvpool/vllm
  stop_unlisted:
    description:
      - Names of every instance under O(state_dir) that is to stay (O(name) among them). Before anything else, every
        other instance this module started under O(state_dir) (a C(<name>/settings.json) there) that still runs is
        stopped as O(state=stopped) stops it, and named in RV(stopped_unlisted). Use it to retire instances that
        were removed from an inventory in the same call that launches the listed ones.
      - Unset stops nothing else.
    type: list
    elements: str
  wait:
    description:
      - Wait for the health gate. C(false) returns right after the launch (see the description).
      - With C(false), an instance that already ran with the same settings (not launched by an earlier C(false)
        call still loading) gets one poll of the health gate, without waiting, and is reported C(healthy) when it
        passes; otherwise C(unknown), and a later call with C(true) waits for it (and restarts it when it stays
        unhealthy).
    type: bool
    default: true
  ready_timeout:
    description: Seconds a start may take to pass the health gate (model loading of a 72B model takes minutes).
    type: float
    default: 1800
  poll_interval:
    description: Seconds between health polls.
    type: float
    default: 0.2
  stop_timeout:
    description: Seconds to wait after SIGTERM before SIGKILL.
    type: float
    default: 60
  health_host:
    description:
      - Address the health polls connect to. Unset uses O(host), or C(127.0.0.1) when the server binds all addresses.
    type: str
  log_lines:
    description: Lines of the instance's log put into the message of a failed start.
    type: int
    default: 40
notes:
  - Only an instance started by this module (its pid file and recorded start time) is managed. A port already
    accepting connections without a managed instance behind it makes the start fail with a message saying so.
  - vLLM starts worker processes (engine core, one per tensor parallel rank) in the same process group; a stop
    waits until the whole group is gone, so the NPUs are free when the task returns.
seealso:
  - module: ascend.kvpool.mooncake_master
  - name: vLLM-Ascend KV pool guide
    description: kv-transfer-config of the Ascend store connector.
    link: https://docs.vllm.ai/projects/ascend/en/latest/
"""

EXAMPLES = r"""
- name: The guide's instance 1, inside the vllm-ascend container
  ascend.kvpool.vllm_server:
    name: qwen-8002
    container: vllm-ascend
    model: /root/.cache/Qwen2.5-72B-Instruct
    served_model_name: qwen
    dtype: bfloat16
    max_model_len: 25600
    tensor_parallel_size: 4
    visible_devices: [0, 1, 2, 3]
    host: 90.90.100.188
    port: 8002
    max_num_batched_tokens: 4096
    gpu_memory_utilization: 0.9
    kv_transfer_config:
      kv_connector: AscendStoreConnector
      kv_role: kv_both
      kv_connector_extra_config: {use_layerwise: false, load_async: true, lookup_rpc_port: 0}
    env:
      MOONCAKE_CONFIG_PATH: /etc/ascend-kvpool/mooncake.json
      PYTHONHASHSEED: "0"
      VLLM_HOST_IP: 90.90.100.188
      ASCEND_BUFFER_POOL: "4:8"
    path_prepend:
      LD_LIBRARY_PATH: [/usr/local/Ascend/ascend-toolkit/latest/python/site-packages]
  register: instance

- name: Show where it answers
  ansible.builtin.debug:
    msg: "{{ instance.endpoint }} serves {{ instance.models }} (ready in {{ instance.ready_seconds }} s)"

- name: Launch two instances, then wait for both (the waits overlap)
  ascend.kvpool.vllm_server:
    name: "{{ item.name }}"
    model: /models/qwen
    served_model_name: qwen
    port: "{{ item.port }}"
    visible_devices: "{{ item.devices }}"
    wait: false
  loop: &instances
    - {name: a, port: 8002, devices: [0, 1, 2, 3]}
    - {name: b, port: 8003, devices: [4, 5, 6, 7]}

- name: Wait until both are healthy
  ascend.kvpool.vllm_server:
    name: "{{ item.name }}"
    model: /models/qwen
    served_model_name: qwen
    port: "{{ item.port }}"
    visible_devices: "{{ item.devices }}"
  loop: *instances

- name: Stop an instance
  ascend.kvpool.vllm_server:
    name: qwen-8002
    container: vllm-ascend
    state: stopped
"""

RETURN = r"""
state:
  description: State of the instance after the task (C(running) or C(stopped)).
  returned: always
  type: str
  sample: running
action:
  description: What the task did (or would do in check mode).
  returned: always
  type: str
  sample: started
  choices: [none, started, restarted, stopped]
reason:
  description: Why it did it.
  returned: always
  type: str
  sample: settings changed
health:
  description:
    - C(healthy) (passed the health gate), C(starting) (launched, not waited for), C(unknown) (check mode, nothing
      polled; or O(wait=false) and one poll of a running instance did not pass the gate) or C(stopped).
  returned: always
  type: str
  sample: healthy
pid:
  description: Pid of the instance (in the container's pid namespace when O(container) is set); null when stopped.
  returned: always
  type: int
  sample: 4682
argv:
  description: The effective command line.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/bin/vllm, serve, /models/qwen, --served-model-name, qwen, --port, "8002"]
env:
  description: The environment given to the process (besides what it inherits), without the API key.
  returned: always
  type: dict
  sample: {ASCEND_RT_VISIBLE_DEVICES: "0,1,2,3", PYTHONHASHSEED: "0"}
fingerprint:
  description: sha256 of the effective command line, environment and API key digest; a change restarts the
    instance.
  returned: always
  type: str
endpoint:
  description: Base URL of the OpenAI-compatible API, as seen from the host.
  returned: always
  type: str
  sample: http://127.0.0.1:8002
models:
  description: Model ids listed by C(/v1/models) at the last poll.
  returned: always
  type: list
  elements: str
  sample: [qwen]
ready_seconds:
  description: Seconds the instance took to pass the health gate after its start (or to answer when it already ran);
    null when nothing was polled.
  returned: always
  type: float
  sample: 41.3
log_path:
  description: The instance's log file (the previous run's log is kept as C(<log_path>.1)).
  returned: always
  type: str
  sample: /var/lib/ascend-kvpool/vllm/qwen-8002/vllm.log
log_tail:
  description: Last lines of the log.
  returned: on a failed start
  type: str
stopped_unlisted:
  description: Instances under O(state_dir) not named in O(stop_unlisted) that were stopped (or would be, in check
    mode); empty when O(stop_unlisted) is unset.
  returned: always
  type: list
  elements: str
  sample: [qwen-8003]
"""

import binascii
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _vllm
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import (
    ProcError,
    ProcessTarget,
    http_status,
    tail_text,
    tcp_open,
    wait_until,
)

BINARY_DIRS = ['/usr/local/bin', '/usr/local/python3*/bin']
PID_NAME = 'vllm.pid'
LOG_NAME = 'vllm.log'
SETTINGS_NAME = 'settings.json'
KILL_WAIT = 5.0

# sh program that prepends to inherited variables, then execs the argv: pairs NAME VALUE, then --, then argv.
PREPEND_SCRIPT = (
    'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do '
    'n=$1; v=$2; shift 2; eval "o=\\${$n-}"; '
    'if [ -n "$o" ]; then v="$v:$o"; fi; export "$n=$v"; done; '
    'shift; exec "$@"'
)
# sh program that says whether any process of a group is left: $1 the group id.
GROUP_ALIVE_SCRIPT = 'kill -s 0 -- "-$1" 2>/dev/null'


# --- process identity and group handling (adapters over _proc.ProcessTarget) -----------------------------------

def proc_starttime(target, pid):
    """Start time (clock ticks) of pid on the target, or None when it does not exist or is a zombie."""
    if not pid:
        return None
    stat = target.read_file('/proc/%d/stat' % pid)
    if not stat:
        return None
    if _vllm.stat_state(stat) in ('Z', 'X', 'x', None):
        return None
    return _vllm.stat_starttime(stat)


def same_process(target, recorded):
    """The recorded pid when it is still the process this module started (pid and start time), else None."""
    if not recorded:
        return None
    pid = recorded.get('pid')
    if not pid:
        return None
    start = proc_starttime(target, pid)
    if start is None:
        return None
    if recorded.get('starttime') is not None and start != recorded['starttime']:
        return None
    return pid


def orphan_group(target, recorded):
    """The recorded pid's process group when its leader is gone but members remain, else None.

    vLLM's engine core and tensor parallel workers keep the NPUs while they live. A process group id cannot be
    handed out as a new pid while the group exists, so a live group without a live leader is this instance's.
    """
    pid = (recorded or {}).get('pid')
    if not pid:
        return None
    stat = target.read_file('/proc/%d/stat' % pid)
    if stat and _vllm.stat_state(stat) not in ('Z', 'X', 'x', None):
        return None  # a live process has that pid: the instance itself, or a reused pid
    return pid if group_alive(target, pid) else None


def group_alive(target, pgid):
    if not pgid:
        return False
    if not target.container:
        try:
            os.killpg(pgid, 0)
            return True
        except OSError:
            return False
    rc, dummy, dummy2 = target.run(['sh', '-c', GROUP_ALIVE_SCRIPT, 'kvpool-group', str(pgid)])
    return rc == 0


def stop_instance(target, pid, timeout, interval, pid_file):
    """SIGTERM (and SIGCONT) to the process group, wait until the whole group is gone, SIGKILL what is left.

    vLLM's engine core and tensor parallel workers live in the instance's process group; waiting for all of them
    (not only the API server) means the NPUs are free when the stop returns.
    """
    how = 'gone'
    if group_alive(target, pid):
        target.signal(pid, 'TERM')
        target.signal(pid, 'CONT')  # a stopped process handles SIGTERM only once it runs again
        how = 'term'
        res = wait_until([('group gone', lambda: not group_alive(target, pid))], timeout, interval)
        if not res['ready']:
            target.signal(pid, 'KILL')
            how = 'kill'
            res = wait_until([('group gone', lambda: not group_alive(target, pid))], KILL_WAIT, interval)
            if not res['ready']:
                raise ProcError('processes of group %d in %s survived SIGKILL' % (pid, target.describe()))
    target.remove_file(pid_file)
    return how


# --- settings file ------------------------------------------------------------------------------------------

def read_settings(target, path):
    raw = target.read_file(path)
    if not raw:
        return None
    try:
        data = json.loads(raw.decode('utf-8', 'replace') if isinstance(raw, bytes) else raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get('argv') else None


def write_settings(target, path, data):
    target.write_file(path, json.dumps(data, indent=2, sort_keys=True) + '\n', mode=0o600)


def stop_unlisted(module, target, keep):
    """Stop every instance recorded under state_dir whose name is not in ``keep``; returns their names (in check
    mode: the names that would be stopped)."""
    p = module.params
    state_dir = p['state_dir'].rstrip('/') or ''
    rc, out, dummy = target.run(['find', state_dir + '/', '-mindepth', '2', '-maxdepth', '2', '-name', SETTINGS_NAME])
    stopped = []
    for other in _vllm.managed_names(out if rc == 0 else '', SETTINGS_NAME):
        if other in keep:
            continue
        settings_path = '%s/%s/%s' % (state_dir, other, SETTINGS_NAME)
        recorded = read_settings(target, settings_path)
        pid = same_process(target, recorded) or orphan_group(target, recorded)
        if not pid:
            continue
        if not module.check_mode:
            try:
                stop_instance(target, pid, p['stop_timeout'], p['poll_interval'],
                              '%s/%s/%s' % (state_dir, other, PID_NAME))
                recorded.update(pid=None, starttime=None, awaiting=False)
                write_settings(target, settings_path, recorded)
            except ProcError as exc:
                module.fail_json(msg='could not stop vllm instance %s, which is not in stop_unlisted: %s'
                                     % (other, exc), stopped_unlisted=stopped)
        stopped.append(other)
    return stopped


def launch_argv(argv, path_prepend):
    if not path_prepend:
        return list(argv)
    pairs = []
    for key in sorted(path_prepend):
        pairs.extend([key, ':'.join(path_prepend[key])])
    return ['sh', '-c', PREPEND_SCRIPT, 'kvpool-vllm'] + pairs + ['--'] + list(argv)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['started', 'stopped', 'restarted'], default='started'),
            name=dict(type='str', required=True),
            model=dict(type='str'),
            served_model_name=dict(type='str'),
            dtype=dict(type='str'),
            max_model_len=dict(type='int'),
            tensor_parallel_size=dict(type='int'),
            host=dict(type='str'),
            port=dict(type='int'),
            max_num_batched_tokens=dict(type='int', no_log=False),
            gpu_memory_utilization=dict(type='float'),
            kv_transfer_config=dict(type='dict'),
            extra_args=dict(type='list', elements='str', default=[]),
            env=dict(type='dict', default={}),
            visible_devices=dict(type='list', elements='int'),
            path_prepend=dict(type='dict', default={}),
            binary=dict(type='str', default='vllm'),
            container=dict(type='str'),
            state_dir=dict(type='path', default='/var/lib/ascend-kvpool/vllm'),
            stop_unlisted=dict(type='list', elements='str'),
            wait=dict(type='bool', default=True),
            ready_timeout=dict(type='float', default=1800),
            poll_interval=dict(type='float', default=0.2),
            stop_timeout=dict(type='float', default=60),
            health_host=dict(type='str'),
            log_lines=dict(type='int', default=40),
            api_key=dict(type='str', no_log=True),
        ),
        required_if=[('state', 'started', ('model', 'port')), ('state', 'restarted', ('model', 'port'))],
        supports_check_mode=True,
    )
    p = module.params
    if not _vllm.NAME_RE.match(p['name']):
        module.fail_json(msg='name %r must be letters, digits, ".", "_" or "-" (it names the state directory)'
                             % p['name'])
    if p['port'] is not None and not 1 <= p['port'] <= 65535:
        module.fail_json(msg='port must be a TCP port 1-65535, got %d' % p['port'])
    if p['gpu_memory_utilization'] is not None and not 0 < p['gpu_memory_utilization'] <= 1:
        module.fail_json(msg='gpu_memory_utilization must be in (0, 1], got %s' % p['gpu_memory_utilization'])
    if p['poll_interval'] <= 0 or p['ready_timeout'] <= 0:
        module.fail_json(msg='poll_interval and ready_timeout must be positive')
    env = dict((str(k), '' if v is None else str(v)) for k, v in (p['env'] or {}).items())
    bad_names = [k for k in list(env) + list(p['path_prepend'] or {}) if not _vllm.ENV_NAME_RE.match(k)]
    if bad_names:
        module.fail_json(msg='not valid environment variable names: %s' % ', '.join(sorted(bad_names)))
    misplaced = _vllm.forbidden_key_settings(env, p['extra_args'])
    if misplaced:
        # Mask the key wherever fail_json would echo it (the task's invocation holds extra_args as given).
        module.no_log_values.update(_vllm.api_key_values(p['extra_args']))
        if _vllm.API_KEY_ENV in env and env[_vllm.API_KEY_ENV]:
            module.no_log_values.add(env[_vllm.API_KEY_ENV])
        module.fail_json(msg='set the API key with api_key (kept out of the command line, the settings file and the '
                             'output), not %s' % ' or '.join(misplaced))
    if p['stop_unlisted'] is not None and p['name'] not in p['stop_unlisted']:
        module.fail_json(msg='name %s must be one of stop_unlisted (the instances that stay), got %s'
                             % (p['name'], ', '.join(p['stop_unlisted']) or 'an empty list'))
    api_key = p['api_key'] or None
    path_prepend = {}
    for key, value in sorted((p['path_prepend'] or {}).items()):
        items = value if isinstance(value, list) else [value]
        items = [str(i) for i in items if i not in (None, '')]
        if items:
            path_prepend[key] = items
    if p['visible_devices'] is not None:
        if p['tensor_parallel_size'] and p['tensor_parallel_size'] != len(p['visible_devices']):
            module.fail_json(msg='tensor_parallel_size %d does not match the %d visible device(s) %s; vLLM would fail '
                                 'at start' % (p['tensor_parallel_size'], len(p['visible_devices']),
                                               p['visible_devices']))
        env['ASCEND_RT_VISIBLE_DEVICES'] = ','.join(str(d) for d in p['visible_devices'])

    target = ProcessTarget(module, p['container'], docker=module.get_bin_path('docker') or 'docker')
    try:
        target.check_container()
    except ProcError as exc:
        # Nothing can run in a container that does not run: a stop has nothing to do, and in check mode a start
        # is what would happen once an earlier task (not run in check mode) has created the container.
        if p['state'] == 'stopped' or module.check_mode:
            module.exit_json(changed=p['state'] != 'stopped', state='stopped', pid=None, health='unknown',
                             action='none' if p['state'] == 'stopped' else 'started', reason=str(exc), argv=[],
                             env=env, fingerprint='', endpoint=None, models=[], ready_seconds=None, log_path='',
                             stopped_unlisted=[])
        module.fail_json(msg=str(exc))

    inst_dir = '%s/%s' % (p['state_dir'].rstrip('/') or '', p['name'])
    pid_path = '%s/%s' % (inst_dir, PID_NAME)
    log_path = '%s/%s' % (inst_dir, LOG_NAME)
    settings_path = '%s/%s' % (inst_dir, SETTINGS_NAME)
    host = p['health_host'] or _vllm.probe_host(p['host'])
    endpoint = 'http://%s' % _vllm.format_host_port(host, p['port']) if p['port'] else None
    unlisted = stop_unlisted(module, target, p['stop_unlisted']) if p['stop_unlisted'] is not None else []
    result = dict(changed=bool(unlisted), endpoint=endpoint, log_path=log_path, ready_seconds=None, models=[],
                  health='stopped', stopped_unlisted=unlisted)

    recorded = read_settings(target, settings_path)
    running = same_process(target, recorded)
    before_text = _vllm.settings_text(recorded['argv'], recorded.get('env'), recorded.get('path_prepend'),
                                      recorded.get('api_key_sha256')) if running else ''

    def fail_with_log(why, **extra):
        log = target.read_file(log_path)
        tail = tail_text(log, p['log_lines'])
        error = _vllm.main_error(log)
        result.update(extra)
        module.fail_json(msg='vllm instance %s %s%s. Last lines of %s:\n%s'
                             % (p['name'], why, (' (error: %s)' % error) if error else '', log_path, tail),
                         log_tail=tail, **result)

    # --- stopped ---------------------------------------------------------------------------------------------
    if p['state'] == 'stopped':
        result.update(state='stopped', pid=None, argv=(recorded or {}).get('argv') or [],
                      env=(recorded or {}).get('env') or {}, fingerprint=(recorded or {}).get('fingerprint') or '',
                      action='none', reason='not running')
        leftover = None if running else orphan_group(target, recorded)
        if running or leftover:
            if running:
                result.update(changed=True, action='stopped', reason='running (pid %d)' % running)
            else:
                result.update(changed=True, action='stopped',
                              reason='worker processes of a dead instance left (process group %s)' % leftover)
            result['diff'] = dict(before=before_text, after='')
            if not module.check_mode:
                try:
                    stop_instance(target, running or leftover, p['stop_timeout'], p['poll_interval'], pid_path)
                    recorded.update(pid=None, starttime=None, awaiting=False)
                    write_settings(target, settings_path, recorded)
                except ProcError as exc:
                    module.fail_json(msg='could not stop vllm instance %s: %s' % (p['name'], exc), **result)
        module.exit_json(**result)

    # --- started / restarted -----------------------------------------------------------------------------------
    binary = target.which(p['binary'], BINARY_DIRS)
    if not binary:
        module.fail_json(msg='%s not found in %s (looked on PATH and in %s). Install vLLM-Ascend (or use its image) '
                             'or set binary to its path.' % (p['binary'], target.describe(), ', '.join(BINARY_DIRS)))
    argv = _vllm.build_argv(binary, p)
    # Only a salted digest of the key is recorded and compared; the salt stays with the instance's settings.
    key_salt = ((recorded or {}).get('api_key_salt') or binascii.hexlify(os.urandom(16)).decode()) if api_key else None
    key_digest = _vllm.api_key_digest(api_key, key_salt) if api_key else None
    fp = _vllm.fingerprint(argv, env, path_prepend, key_digest)
    after_text = _vllm.settings_text(argv, env, path_prepend, key_digest)
    result.update(argv=argv, env=env, fingerprint=fp, pid=running, state='running' if running else 'stopped',
                  action='none', reason='running with the same settings')

    served = p['served_model_name'] or p['model']
    last = {'models': [], 'health': False, 'deadline': 0.0}
    auth = {'Authorization': 'Bearer %s' % api_key} if api_key else None  # /health needs none, /v1/* does

    def request_timeout(cap):
        # Never wait on one request much past the deadline (a hung server accepts TCP and answers nothing).
        return max(0.2, min(cap, last['deadline'] - time.time()))

    def health_ok():
        status, dummy = http_status(endpoint + '/health', timeout=request_timeout(1.0))
        last['health'] = status == 200
        return last['health']

    def models_ok():
        if not last['health']:
            return False  # asked only once /health answers, so one poll costs one request
        status, body = http_status(endpoint + '/v1/models', timeout=request_timeout(2.0), headers=auth)
        last['models'] = _vllm.parse_models(body) if status == 200 else []
        return served in last['models']

    def gate():
        last['health'] = False
        return [('GET %s/health -> 200' % endpoint, health_ok),
                ('GET %s/v1/models lists %s' % (endpoint, served), models_ok)]

    def wait_for(pid, deadline_from):
        timeout = max(p['poll_interval'], deadline_from + p['ready_timeout'] - time.time())
        last['deadline'] = time.time() + timeout
        res = wait_until(gate(), timeout, p['poll_interval'], alive=lambda: same_process(target, current) == pid)
        result['models'] = last['models']
        return res

    current = recorded
    action, reason = 'none', 'running with the same settings'
    awaiting = bool(running and recorded.get('awaiting') and recorded.get('fingerprint') == fp)
    if p['state'] == 'restarted':
        action, reason = ('restarted', 'state=restarted') if running else ('started', 'not running')
    elif not running:
        if recorded and recorded.get('awaiting') and recorded.get('fingerprint') == fp and p['wait']:
            # Launched by an earlier wait=false task with these settings, and dead before it was healthy.
            if not module.check_mode:
                recorded['awaiting'] = False
                write_settings(target, settings_path, recorded)
            fail_with_log('exited after its start (launched with wait=false at %s)'
                          % time.strftime('%H:%M:%S', time.localtime(recorded.get('started_at') or 0)),
                          state='stopped', pid=None, health='stopped', reason='exited after its start')
        action, reason = 'started', ('not running (pid file %s)' % pid_path if recorded else 'never started here')
    elif recorded.get('fingerprint') != fp:
        action, reason = 'restarted', 'settings changed'
    elif not p['wait'] and awaiting:
        result['health'] = 'starting'
    elif not p['wait']:
        # Already ran before this launch: one poll of the gate (no waiting). Healthy needs no later wait; anything
        # else is left to the wait (wait=true), which restarts an instance that stays unhealthy.
        last['deadline'] = time.time() + 2.0
        res = wait_until(gate(), 0, p['poll_interval'], alive=lambda: same_process(target, current) == running)
        result['models'] = last['models']
        result['health'] = 'healthy' if res['ready'] else 'unknown'
        if res['ready']:
            result['ready_seconds'] = res['elapsed']
    else:
        res = wait_for(running, (recorded.get('started_at') or 0) if awaiting else time.time())
        result['ready_seconds'] = round(time.time() - recorded['started_at'], 3) \
            if awaiting and recorded.get('started_at') else res['elapsed']
        if res['ready']:
            result['health'] = 'healthy'
            if awaiting and not module.check_mode:
                recorded.update(awaiting=False, healthy_at=time.time())
                write_settings(target, settings_path, recorded)
        elif awaiting:
            # Our own start, still not healthy after ready_timeout (or died meanwhile): a failed start.
            if res['died']:
                why = 'exited after its start'
            else:
                why = 'was not healthy %.0f s after its start (waiting for: %s)' % (
                    p['ready_timeout'], ', '.join(res['pending']))
            if not module.check_mode:
                try:
                    if not res['died']:
                        stop_instance(target, running, p['stop_timeout'], p['poll_interval'], pid_path)
                    recorded.update(awaiting=False, pid=None, starttime=None)
                    write_settings(target, settings_path, recorded)
                    result.update(changed=not res['died'], state='stopped', pid=None)
                except ProcError:
                    pass
            fail_with_log(why, health='unhealthy', reason='failed start')
        elif res['died']:
            action, reason = 'started', 'exited while being checked'
            running = None
        else:
            action, reason = 'restarted', 'running but not healthy (%s)' % ', '.join(res['pending'])

    if action == 'none':
        module.exit_json(**result)

    result.update(changed=True, action=action, reason=reason)
    result['diff'] = dict(before=before_text, after=after_text)
    if module.check_mode:
        result['health'] = 'unknown'
        module.exit_json(**result)

    # From here `changed` tells what really happened: an instance stopped, or a new one running.
    result['changed'] = bool(unlisted)
    try:
        if running:
            stop_instance(target, running, p['stop_timeout'], p['poll_interval'], pid_path)
            result.update(pid=None, state='stopped', changed=True)
        else:
            leftover = orphan_group(target, recorded)
            if leftover:
                # Workers of a dead instance still hold its NPUs: they go before the new start.
                stop_instance(target, leftover, p['stop_timeout'], p['poll_interval'], pid_path)
                result['changed'] = True
        if tcp_open(host, p['port'], timeout=0.5):
            module.fail_json(msg='port %d on %s already accepts connections, but no vllm instance %s started by this '
                                 'module runs (pid file %s). Stop the other process (an instance started by hand, or '
                                 'another instance on the same port?) or choose another port.'
                                 % (p['port'], host, p['name'], pid_path), **result)
        target.makedirs(inst_dir)
        started_at = time.time()
        pid = target.start(launch_argv(argv, path_prepend), pid_path, log_path, env=env,
                           secret_env={_vllm.API_KEY_ENV: api_key} if api_key else None)
    except ProcError as exc:
        module.fail_json(msg='could not start vllm instance %s: %s' % (p['name'], exc), **result)
    result.update(pid=pid, state='running', changed=True, health='starting')
    current = {'argv': argv, 'env': env, 'path_prepend': path_prepend, 'fingerprint': fp, 'pid': pid,
               'starttime': proc_starttime(target, pid), 'started_at': started_at, 'awaiting': not p['wait'],
               'name': p['name'], 'port': p['port'], 'served_model_name': served}
    if api_key:
        current.update(api_key_sha256=key_digest, api_key_salt=key_salt)
    # Recorded at once, so a run interrupted during the wait still finds (and manages) this process.
    try:
        write_settings(target, settings_path, current)
    except (ProcError, IOError, OSError) as exc:
        stop_instance(target, pid, p['stop_timeout'], p['poll_interval'], pid_path)
        module.fail_json(msg='vllm instance %s was stopped again: %s could not be written: %s'
                             % (p['name'], settings_path, exc), **result)
    if current['starttime'] is None:
        fail_with_log('exited right after the start', state='stopped', pid=None, health='stopped')
    if not p['wait']:
        module.exit_json(**result)

    res = wait_for(pid, started_at)
    result['ready_seconds'] = res['elapsed']
    if not res['ready']:
        if res['died'] or same_process(target, current) != pid:
            why = 'exited right after the start'
        else:
            why = 'was not healthy after %.1f s (waiting for: %s)' % (p['ready_timeout'], ', '.join(res['pending']))
            try:
                stop_instance(target, pid, p['stop_timeout'], p['poll_interval'], pid_path)
            except ProcError:
                pass
        result.update(state='stopped', pid=None, changed=bool(running), health='unhealthy', reason='failed start')
        current.update(pid=None, starttime=None)
        try:
            write_settings(target, settings_path, current)
        except (ProcError, IOError, OSError):
            pass
        fail_with_log(why)
    result['health'] = 'healthy'
    module.exit_json(**result)


if __name__ == '__main__':
    main()
