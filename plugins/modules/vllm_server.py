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
short_description: Run one vllm serve instance as a health-gated systemd unit (or container)
version_added: 1.0.0
description:
  - Starts, stops or restarts one C(vllm serve) process (a vLLM-Ascend instance) as the systemd unit
    C(kvpool-vllm-<name>.service) on the host, or as the container C(kvpool-vllm-<name>) made from the node's
    vllm-ascend container (O(container)), with the device nodes of its own NPUs only.
  - The command line is built from structured parameters (model, served name, tensor parallel size, host, port,
    the tuning flags of O(serve_flags), C(--kv-transfer-config) from a dict) plus O(extra_args); the environment
    from O(env), O(visible_devices) and O(path_prepend).
  - In a container, the container (its image, mounts, its own NPUs' device nodes, restart policy, the API key in
    its environment) is made and kept by M(community.docker.docker_container), which the module's action plugin
    runs with the definition this module renders; docker's restart policy keeps the instance running there.
  - systemd keeps it running. An instance that dies (killed, OOM, an NPU error) is restarted by systemd within a
    second, at a bounded rate (O(restart_limit_burst)); after a reboot the enabled unit starts it again, after the
    master unit of the same host.
  - Idempotent. An instance whose unit file (and secret environment file) is the wanted one and that passes the
    health gate is left alone (C(ok)). A different definition rewrites the unit and restarts it (C(changed), with a
    diff of the unit file). A failed unit is started again; a live one that stays unhealthy for O(ready_timeout) is
    restarted.
  - The health gate is C(GET /health) answering 200 and C(GET /v1/models) listing the served model name (sent with
    O(api_key) as a bearer token when set), polled every O(poll_interval) seconds for at most O(ready_timeout)
    seconds. A start that fails (systemd gives up restarting it, or it is not healthy in time) fails the task with
    the unit's name and the tail of its journal (C(journalctl -u kvpool-vllm-<name> -n <log_lines>)).
  - With O(wait=false) the task returns as soon as the process is launched. A later task with O(wait=true) and the
    same parameters then waits for that start (its deadline counts from the unit's start), and reports its failure
    with the journal tail instead of starting it again. This lets a play launch every instance of a host first and
    then wait for all of them, so the waits overlap.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.service
  - ascend.kvpool.service.unit
  - ascend.kvpool.vllm_serve_flags
options:
  state:
    description:
      - C(started) makes sure the instance runs with these settings and passes the health gate.
      - C(stopped) stops the instance's unit (SIGTERM to its whole cgroup, engine and workers included, SIGKILL
        after O(stop_timeout)), disables it and removes its unit file.
      - C(restarted) always restarts it.
    type: str
    choices: [started, stopped, restarted]
    default: started
  name:
    description:
      - Name of the instance on this host (letters, digits, C(.), C(_), C(-)). Names its unit
        (C(kvpool-vllm-<name>.service)); two instances of one host need two names.
    type: str
    required: true
  model:
    description: Model path or name, the positional argument of C(vllm serve). Required (not empty) unless
      O(state=stopped).
    type: str
  served_model_name:
    description:
      - C(--served-model-name). The health gate waits until C(/v1/models) lists it (vLLM lists the model path when
        it is unset).
    type: str
  tensor_parallel_size:
    description:
      - C(--tensor-parallel-size), at least 1. When O(visible_devices) is given it must match their number.
    type: int
  host:
    description: C(--host), the address the API server binds to. One address, no port (the port is O(port)).
    type: str
  port:
    description: C(--port) of the API server, 1-65535. Required unless O(state=stopped).
    type: int
  kv_transfer_config:
    description:
      - C(--kv-transfer-config) as a dict, passed as compact JSON with sorted keys
        (for example C(kv_connector), C(kv_role), C(kv_connector_extra_config)).
      - A C(lookup_rpc_port) (or C(mooncake_rpc_port)) in C(kv_connector_extra_config) is a whole number, 0 or
        more (C("0") too).
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
      - A variable whose name says it holds a secret (C(HF_TOKEN), C(*_API_KEY), C(*PASSWORD*), C(*SECRET*),
        C(*AUTH*), ...) and has a value is written into the unit's mode 0600 C(EnvironmentFile=) (in container mode
        it is filled into the container's environment by the action plugin), never into the world-readable unit file;
        its value is masked in the result, the diff and every message.
      - Names are letters, digits and C(_), not starting with a digit (no C(=), not empty); a null value is the
        empty string.
    type: dict
    default: {}
  api_key:
    description:
      - API key the instance requires on C(/v1/*) (vLLM's C(VLLM_API_KEY); C(/health) and C(/metrics) stay open).
      - Handed to the process through its environment, never its command line (which every user of the host can
        read with C(ps)) nor its unit file (world-readable), and not returned. It is in
        C(/etc/ascend-kvpool/secrets/kvpool-vllm-<name>.env) (mode 0600, C(EnvironmentFile=)); a new key restarts
        the instance (the diff shows C(VLLM_API_KEY=<secret, changed>)) and the same key changes nothing.
      - Unset or empty runs the instance without a key. C(--api-key) in O(extra_args) is refused.
    type: str
  visible_devices:
    description:
      - NPU ids the instance may use, set as C(ASCEND_RT_VISIBLE_DEVICES). Their number must equal
        O(tensor_parallel_size) when that is set.
      - Ids of this node's NPUs, each once, 0-15 (0-7 on an Atlas A2 with 8 NPUs, 0-15 on an A3 with 16 dies). An
        empty list is refused (it would hide every NPU); unset lets the instance see them all.
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
  stop_unlisted:
    description:
      - Names of every instance of this host that is to stay (O(name) among them). Before anything else, every
        other instance unit of this collection (C(kvpool-vllm-*)) that still runs is stopped as O(state=stopped)
        stops it, and named in RV(stopped_unlisted).
        Units of other names that no longer run (a failed start) are removed without being reported. Use it to
        retire instances that were removed from an inventory in the same call that launches the listed ones.
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
notes:
  - Only the instance's own unit is managed. A port already accepting connections without the unit running
    makes the start fail with a message saying so; that process is never signalled.
  - vLLM's worker processes (engine core, one per tensor parallel rank) are in the unit's cgroup; a stop returns
    when all of them are gone, so the NPUs are free when the task returns.
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
    tensor_parallel_size: 4
    visible_devices: [0, 1, 2, 3]
    host: 90.90.100.188
    port: 8002
    serve_flags:
      dtype: bfloat16
      max_model_len: 25600
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
  description: Main pid of the instance's unit (of the container's process on the host with O(container)); null
    when stopped.
  returned: always
  type: int
  sample: 4682
unit:
  description: The systemd unit (or the container) of the instance.
  returned: always
  type: str
  sample: kvpool-vllm-qwen-8002.service
logs:
  description: How to read the instance's log.
  returned: always
  type: str
  sample: journalctl -u kvpool-vllm-qwen-8002
argv:
  description: The effective command line.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/bin/vllm, serve, /models/qwen, --served-model-name, qwen, --port, "8002"]
env:
  description: The environment given to the process (besides what it inherits), without the API key; the value of
    every secret-named variable (C(HF_TOKEN), C(*_API_KEY), ...) is C(********).
  returned: always
  type: dict
  sample: {ASCEND_RT_VISIBLE_DEVICES: "0,1,2,3", PYTHONHASHSEED: "0"}
fingerprint:
  description: sha256 of the unit file (or container definition) and the names of its secrets; a change restarts
    the instance.
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
log_tail:
  description: Last lines of the journal (or C(docker logs)).
  returned: on a failed start
  type: str
stopped_unlisted:
  description: Instances of this host not named in O(stop_unlisted) that were stopped (or would be, in check
    mode); empty when O(stop_unlisted) is unset.
  returned: always
  type: list
  elements: str
  sample: [qwen-8003]
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _secrets, _validate, _vllm
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import http_status, tcp_open
from ansible_collections.ascend.kvpool.plugins.module_utils._service import (
    ServiceError,
    ServiceSpec,
    backend_for,
    check_service_params,
    find_binary,
    lifecycle_for,
    spec_for,
    unit_argument_spec,
)

BINARY_DIRS = ['/usr/local/bin', '/usr/local/python3*/bin']
UNIT_PREFIX = 'kvpool-vllm-'
MASTER_UNIT = 'kvpool-mooncake-master'

# sh program that prepends to inherited variables, then execs the argv: pairs NAME VALUE, then --, then argv.
PREPEND_SCRIPT = (
    'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do '
    'n=$1; v=$2; shift 2; eval "o=\\${$n-}"; '
    'if [ -n "$o" ]; then v="$v:$o"; fi; export "$n=$v"; done; '
    'shift; exec "$@"'
)


def unit_name(name):
    return UNIT_PREFIX + name


def launch_argv(argv, path_prepend):
    if not path_prepend:
        return list(argv)
    pairs = []
    for key in sorted(path_prepend):
        pairs.extend([key, ':'.join(path_prepend[key])])
    return ['/bin/sh', '-c', PREPEND_SCRIPT, 'kvpool-vllm'] + pairs + ['--'] + list(argv)


def stop_unlisted(lifecycle, keep, stop_timeout):
    """Stop every instance unit of this collection not named in ``keep``; raises ServiceError naming the one that
    could not be stopped (with ``stopped_unlisted``, those stopped before it)."""
    names = set(n[len(UNIT_PREFIX):] for n in lifecycle.backend.list_units(UNIT_PREFIX))
    stopped = []
    for other in sorted(names - set(keep)):
        spec = ServiceSpec(unit_name(other), '', ['/bin/true'], stop_timeout=stop_timeout)
        try:
            if lifecycle.stop_other(spec):
                stopped.append(other)
        except ServiceError as exc:
            raise ServiceError('could not stop vllm instance %s, which is not in stop_unlisted: %s' % (other, exc),
                               result=dict(stopped_unlisted=stopped)) from exc
    return stopped


def check_params(module):
    """Everything the argument spec cannot say, in one place: the rules of ``_vllm`` (the ones the role's plan
    applies to its variables) and the service options. Returns the environment (``env`` with null values as empty
    strings and ``ASCEND_RT_VISIBLE_DEVICES`` from ``visible_devices``) and the ``path_prepend`` lists.
    Raises KvpoolError naming the option, the value and the fix (``main()`` fails the task with it)."""
    p = module.params
    _vllm.check_name(p['name'], 'name')
    if p['state'] != 'stopped':
        _vllm.check_model(p['model'], 'model')
    flags = p['serve_flags'] = dict(p['serve_flags'] or {})
    for flag in _vllm.SERVE_FLAGS:
        if flag.own:
            if flag.name in _vllm.ADDRESS_FLAGS and p['state'] == 'stopped':
                continue  # a stop uses no address: a typo there must not keep an instance from stopping
            p[flag.name] = _vllm.check_serve_flag(flag.name, p[flag.name], flag.name)
        else:
            flags[flag.name] = _vllm.check_serve_flag(flag.name, flags.get(flag.name), 'serve_flags.' + flag.name)
    check_service_params(p)
    if p['state'] != 'stopped':
        _validate.host_address(p['health_host'], 'health_host', 'port')
    env = _validate.environment(p['env'], 'env')
    _validate.env_names(p['path_prepend'] or {}, 'path_prepend')
    _vllm.check_kv_transfer_ports(p['kv_transfer_config'], 'kv_transfer_config')
    try:
        _vllm.check_key_placement(env, p['extra_args'], 'api_key')
    except KvpoolError:
        # Mask the key wherever fail_json would echo it (the task's invocation holds extra_args as given).
        module.no_log_values.update(_vllm.api_key_values(p['extra_args']))
        if env.get(_vllm.API_KEY_ENV):
            module.no_log_values.add(env[_vllm.API_KEY_ENV])
        raise
    if p['stop_unlisted'] is not None and p['name'] not in p['stop_unlisted']:
        raise KvpoolError('name %s must be one of stop_unlisted (the instances that stay), got %s'
                          % (p['name'], ', '.join(p['stop_unlisted']) or 'an empty list'))
    path_prepend = {}
    for key, value in sorted((p['path_prepend'] or {}).items()):
        items = value if isinstance(value, list) else [value]
        items = [str(i) for i in items if i not in (None, '')]
        if items:
            path_prepend[key] = items
    devices = p['visible_devices']
    if devices is not None:
        devices = _vllm.check_devices(devices, 'visible_devices')
        _vllm.check_tensor_parallel(p['tensor_parallel_size'], devices, 'tensor_parallel_size', 'visible_devices')
        env['ASCEND_RT_VISIBLE_DEVICES'] = ','.join(str(d) for d in devices)
    return env, path_prepend


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['started', 'stopped', 'restarted'], default='started'),
            name=dict(type='str', required=True),
            model=dict(type='str'),
            serve_flags=dict(type='dict', default={}, options=_vllm.serve_flag_options()),
            kv_transfer_config=dict(type='dict'),
            extra_args=dict(type='list', elements='str', default=[]),
            env=dict(type='dict', default={}),
            visible_devices=dict(type='list', elements='int'),
            path_prepend=dict(type='dict', default={}),
            binary=dict(type='str', default='vllm'),
            container=dict(type='str'),
            container_step=dict(type='str', choices=['render', 'gate']),
            stop_unlisted=dict(type='list', elements='str'),
            wait=dict(type='bool', default=True),
            ready_timeout=dict(type='float', default=1800),
            poll_interval=dict(type='float', default=0.2),
            stop_timeout=dict(type='float', default=60),
            health_host=dict(type='str'),
            api_key=dict(type='str', no_log=True),
            **dict(unit_argument_spec(), **_vllm.own_flag_options())
        ),
        required_if=[('state', 'started', ('port',)), ('state', 'restarted', ('port',))],
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    """The module's work: returns its result or raises KvpoolError; main() answers the task with either."""
    p = module.params
    # Secret-named variables of env (HF_TOKEN, *_API_KEY) and the values of secret-named flags of extra_args
    # (--hf-token T): masked wherever the result or a message echoes them (argv, the task's input).
    module.no_log_values.update(_secrets.env_secret_values(module.params['env'])
                                + _secrets.secret_values(module.params.get('extra_args')))
    env, path_prepend = check_params(module)
    api_key = p['api_key'] or None
    host = p['health_host'] or _vllm.probe_host(p['host'])
    endpoint = 'http://%s' % _vllm.format_host_port(host, p['port']) if p['port'] else None
    lifecycle = lifecycle_for(module, backend_for(module, p['container']), 'vllm instance %s' % p['name'])
    unlisted = []
    if p['stop_unlisted'] is not None and p['container_step'] != 'gate':  # the gate step comes after the render
        unlisted = stop_unlisted(lifecycle, p['stop_unlisted'], p['stop_timeout'])
    result = dict(changed=bool(unlisted), endpoint=endpoint, ready_seconds=None, models=[], health='stopped',
                  stopped_unlisted=unlisted, env=_secrets.mask_env(env), argv=[])

    argv = []
    if p['state'] != 'stopped':
        binary = find_binary(module, p['binary'], BINARY_DIRS, p['container'])
        if not binary:
            raise ServiceError('%s not found on the host (looked on PATH and in %s). Install vLLM-Ascend (or use its '
                               'image) or set binary to its path.' % (p['binary'], ', '.join(BINARY_DIRS)),
                               result=result)
        argv = _vllm.build_argv(binary, p)
    result['argv'] = argv
    spec = spec_for(p, result, unit_name(p['name']), 'vLLM-Ascend instance %s (ascend.kvpool)' % p['name'],
                    launch_argv(argv, path_prepend) if argv else ['/bin/true'], env=env,
                    secret_env={_vllm.API_KEY_ENV: api_key} if api_key else None, after=[MASTER_UNIT],
                    owner='ascend.kvpool.vllm_server', devices=p['visible_devices'], port=p['port'])

    served = p['served_model_name'] or p['model']
    last = {'health': False, 'deadline': 0.0}
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
        result['models'] = _vllm.parse_models(body) if status == 200 else []
        return served in result['models']

    def gate():
        last['health'] = False
        last['deadline'] = time.time() + p['ready_timeout']
        return [('GET %s/health -> 200' % endpoint, health_ok),
                ('GET %s/v1/models lists %s' % (endpoint, served), models_ok)]

    return lifecycle.ensure(spec, p['state'], result, gate, explain=_vllm.main_error,
                            port_taken=(lambda: tcp_open(host, p['port'], timeout=0.5)) if p['port'] else None)


if __name__ == '__main__':
    main()
