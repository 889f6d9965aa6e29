# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The judgement of the pre-flight checks: every node's facts in, findings (host, check, finding, fix) out.

Pure functions, unit-tested without Ansible. One record per node, as the ``preflight`` role builds it::

    {'host': 'node1',
     'facts': <preflight_facts result>, 'npu': <npu_smi_facts result or None when not checked>,
     'plan': <vllm_instance_plan: instances (name, port, devices, tensor_parallel_size, env, state), warnings>,
     'memory': {'segment_bytes', 'local_buffer_bytes', 'reserve_bytes'},
     'master': {'is_master': bool, 'target': 'host:port' or '', 'port': 50088, 'metrics_port': 9003,
                'lease_ttl_ms': 0 (the binary's default), 'client_ttl_s': 0, 'mooncake_version': '0.3.9'},
     'container': {'enabled': bool, 'image': '...', 'runtime': 'docker'},
     'pool': {'protocol': 'ascend', 'ssd_offload': bool, 'hugepages': 'auto' or a size or 0},
     'extra_ports': {port: 'what uses it'}}   # other services of the host (the router's, when it exists)

The plan also carries ``profile`` (``vllm_plan.version_profile``: release line, requirements, npu_type, transfer_env).
The release checks (``versions``, ``glibc``, ``hugepages``, ``adxl_ports``, ``hccl_roce``, ``timeouts``,
``client_ttl``) are in the second half of this file; docs/preflight.md has their table with the upstream issues.

The model directories checked are the instances' ``model`` values.

The rules the mooncake_config and vllm_instance roles apply too live here once, and reach those roles as filters
(plugins/filter/kvpool.py): :func:`memory_shortfall`, :func:`hash_seed_mismatch`, :func:`master_endpoint`.

``settings``: ``checks`` (list, default all of CHECKS; ``facts`` always runs), ``max_clock_skew_s`` (float),
``compare_model_size`` (bool), ``master_started`` (bool: the master must answer now, an error otherwise. Before
the master phase an unreachable master only counts when the master's own node shows it running, and then as a
warning: the master phase may restart it with other settings, and the reachability is checked again after it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.ascend.kvpool.plugins.module_utils._mooncake import parse_mooncake_version
from ansible_collections.ascend.kvpool.plugins.module_utils._preflight import (
    ephemeral_unreserved,
    reserved_ports_text,
)
from ansible_collections.ascend.kvpool.plugins.module_utils._secrets import mask_argv
from ansible_collections.ascend.kvpool.plugins.module_utils import _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import format_host_port

GIB = 1073741824.0


def compare_versions(a, b):
    """:func:`vllm_plan.compare_versions`, imported on first use: vllm_plan (with _vllm) is large, and the filter
    plugins that import this file pay its compile again in every forked Ansible worker."""
    from ansible_collections.ascend.kvpool.plugins.plugin_utils.vllm_plan import compare_versions as _compare

    return _compare(a, b)


CHECKS = ('facts', 'npu', 'memory', 'port', 'model', 'container', 'hash_seed', 'master', 'clock', 'deprecated',
          'versions', 'glibc', 'hugepages', 'adxl_ports', 'hccl_roce', 'timeouts', 'client_ttl', 'ephemeral_ports',
          'upgrade')


def _finding(host, check, finding, fix, severity='error'):
    return {'host': host, 'check': check, 'severity': severity, 'finding': finding, 'fix': fix}


def _gib(value):
    return '%.1f GiB' % (value / GIB)


def _started(record):
    return [i for i in ((record.get('plan') or {}).get('instances') or []) if i.get('state', 'started') == 'started']


def _cmd(cmdline):
    # preflight_facts masks secrets on the node; masked again here for facts gathered otherwise (no key in a finding)
    return ' '.join(mask_argv(cmdline or []))[:160] or 'unreadable'


def is_our_vllm(cmdline, port):
    """Whether a listener's command line is ``vllm serve ... --port <port>`` (the instance itself, restarted by us)."""
    args = list(cmdline or [])
    if 'serve' not in args or not any(os.path.basename(a) == 'vllm' or a.endswith('/vllm') for a in args):
        return False
    for index, arg in enumerate(args):
        if arg == '--port' and index + 1 < len(args) and args[index + 1] == str(port):
            return True
        if arg == '--port=%s' % port:
            return True
    return False


def held_by(holder, is_ours, *args):
    """Whether a listener (``preflight_facts`` port entry) is held by a process ``is_ours(cmdline, *args)``
    accepts, or by a child of one (vLLM's API server workers and engine processes rename themselves ``VLLM::...``
    with setproctitle; their parent is still the ``vllm serve`` the collection started)."""
    return any(is_ours(cmdline, *args) for cmdline in [holder.get('cmdline')] + list(holder.get('ancestors') or []))


def is_our_master(cmdline):
    return any(os.path.basename(a) == 'mooncake_master' for a in (cmdline or []))


def running_instances(record):
    """Names of this node's instances whose port is held by their own ``vllm serve`` right now."""
    ports = (record.get('facts') or {}).get('ports') or {}
    out = set()
    for inst in _started(record):
        holder = ports.get(str(inst.get('port'))) or {}
        if holder.get('listening') and held_by(holder, is_our_vllm, inst.get('port')):
            out.add(inst.get('name'))
    return out


def module_failed(result, always):
    """Whether a registered module result failed.

    The role registers with ``failed_when: false``, which resets ``failed`` to false, so a result without the key
    the module always returns on success (``always``) failed too.
    """
    result = result or {}
    return bool(result.get('failed')) or always not in result


def npu_devices(npu):
    """{device id: npu-smi chip entry}, and whether the ids are per chip.

    Device ids are ASCEND_RT_VISIBLE_DEVICES ids: the NPU id on boards with one chip per NPU (910B); on boards
    with several chips per NPU the chip's Phy-ID npu-smi prints (A3: two dies per NPU, devices 0-15 on NPUs 0-7).
    """
    entries = [e for e in npu.get('npus') or [] if isinstance(e, dict)]
    per_chip = (len(set(e.get('npu') for e in entries)) < len(entries)
                and all(e.get('phy_id') is not None for e in entries))
    key = 'phy_id' if per_chip else 'npu'
    return dict((e.get(key), e) for e in entries), per_chip


def _process_devices(proc, devices, per_chip):
    if not per_chip:
        return [proc.get('npu')]
    return [dev for dev, e in devices.items()
            if e.get('npu') == proc.get('npu') and proc.get('chip') in (None, e.get('chip'))]


def check_npus(record):
    host, npu = record['host'], record.get('npu')
    if npu is None:
        return []
    if module_failed(npu, 'driver_loaded'):
        return [_finding(host, 'npu', 'npu-smi does not answer: %s' % (npu.get('msg') or 'failed'),
                         'Install or repair the Ascend driver (npu-smi info must print the NPU table), '
                         'or set npu_smi_path.')]
    if npu.get('driver_loaded') is False:
        return [_finding(host, 'npu', npu.get('driver_message') or 'NPU driver not loaded: %s'
                         % (npu.get('driver_error') or 'npu-smi cannot open the NPUs'),
                         'Load the NPU driver, or stop the process or container that holds the NPUs.')]
    found = []
    devices, per_chip = npu_devices(npu)
    unhealthy = dict((u.get('npu'), u) for u in npu.get('unhealthy_npus') or [])
    busy = {}
    for proc in npu.get('processes') or []:
        for dev in _process_devices(proc, devices, per_chip):
            busy.setdefault(dev, []).append(proc)
    ours = running_instances(record)
    for inst in _started(record):
        name = inst.get('name')
        for dev in inst.get('devices') or []:
            entry = devices.get(dev)
            if entry is None:
                found.append(_finding(
                    host, 'npu', 'instance %s needs NPU %d, but npu-smi lists NPUs %s'
                    % (name, dev, sorted(devices) or 'none'),
                    'Give instance %s NPUs this node has (devices of vllm_instance_instances).' % name))
                continue
            where = ' (npu-smi NPU %s chip %s)' % (entry.get('npu'), entry.get('chip')) if per_chip else ''
            sick = entry.get('healthy') is False if 'healthy' in entry else entry.get('npu') in unhealthy
            if sick:
                row = unhealthy.get(entry.get('npu')) or {}
                found.append(_finding(
                    host, 'npu', 'NPU %d%s of instance %s is not healthy (Health %s): %s'
                    % (dev, where, name, entry.get('health') or row.get('health'), (row.get('raw') or '').strip()),
                    'Repair the NPU (npu-smi info -t health -i %s%s) or move instance %s to healthy NPUs.'
                    % (entry.get('npu'), ' -c %s' % entry.get('chip') if per_chip else '', name)))
            if name in ours:
                continue  # the instance itself uses its NPUs
            for proc in busy.get(dev) or []:
                found.append(_finding(
                    host, 'npu', 'NPU %d%s of instance %s is busy: process %s (%s, %s MB) runs on it'
                    % (dev, where, name, proc.get('pid'), proc.get('name'), proc.get('memory_mb')),
                    'Stop that process (or the container it runs in), or give instance %s free NPUs.' % name))
    return found


def _gib_size(value):
    """A configured size for messages: ``100 GiB`` when whole, else ``1.5 GiB``."""
    value = int(value or 0)
    return '%d GiB' % (value // int(GIB)) if value % int(GIB) == 0 else _gib(value)


def memory_needed(tp_sizes, segment_bytes, buffer_bytes, reserve_bytes=0, buffer_ranks=None):
    """Bytes of host memory a node's share of the pool needs: every TP rank of every instance (``tp_sizes``: the
    tensor parallel size of each instance) runs its own Mooncake store client, which registers a global segment and
    a local buffer in host DRAM; plus the reserve kept free beside the pool. ``buffer_ranks``: how many of those
    ranks register the local buffer (None: all; fabric memory, ``ASCEND_ENABLE_USE_FABRIC_MEM=1``, registers none at
    every release: mooncake_backend.py passes ``local_buffer_size=0``)."""
    ranks = sum(int(tp) for tp in tp_sizes or [])
    buffers = ranks if buffer_ranks is None else min(int(buffer_ranks), ranks)
    return ranks * int(segment_bytes or 0) + buffers * int(buffer_bytes or 0) + int(reserve_bytes or 0)


def memory_shortfall(mem_total, tp_sizes, segment_bytes, buffer_bytes, reserve_bytes=0, buffer_ranks=None):
    """'' when :func:`memory_needed` fits in ``mem_total`` (bytes, /proc/meminfo's MemTotal); otherwise what does
    not fit, for the operator: ``2 instance(s) x TP 4 x (global_segment_size 100 GiB + local_buffer_size 1 GiB) +
    reserve 8 GiB needs 816.0 GiB, but MemTotal is 23.5 GiB`` (``with 6 TP rank(s) in all`` instead of ``x TP 4``
    when the instances' TP sizes differ; ``local_buffer_size ... on N rank(s)`` when fabric memory spares the
    others, see ``buffer_ranks``). The caller adds the host and the fix naming its own variables."""
    tp_sizes = [int(tp) for tp in tp_sizes or []]
    needed = memory_needed(tp_sizes, segment_bytes, buffer_bytes, reserve_bytes, buffer_ranks)
    if needed <= int(mem_total):
        return ''
    if tp_sizes and len(set(tp_sizes)) == 1:
        ranks = 'x TP %d' % tp_sizes[0]
    else:
        ranks = 'with %d TP rank(s) in all' % sum(tp_sizes)
    buffer = 'local_buffer_size %s' % _gib_size(buffer_bytes)
    if buffer_ranks is not None and int(buffer_ranks) < sum(tp_sizes):
        buffer += (' on %d rank(s) only: ASCEND_ENABLE_USE_FABRIC_MEM=1 registers none'
                   % min(int(buffer_ranks), sum(tp_sizes)))
    return ('%d instance(s) %s x (global_segment_size %s + %s) + reserve %s needs %s, '
            'but MemTotal is %s' % (len(tp_sizes), ranks, _gib_size(segment_bytes), buffer,
                                    _gib_size(reserve_bytes), _gib(needed), _gib(int(mem_total))))


def check_memory(record):
    host = record['host']
    mem = record.get('memory') or {}
    total = ((record.get('facts') or {}).get('memory') or {}).get('MemTotal')
    started = _started(record)
    if not total or not started or not mem:
        return []
    tp_sizes = [i.get('tensor_parallel_size') or len(i.get('devices') or []) for i in started]
    buffer_ranks = sum(int(tp) for i, tp in zip(started, tp_sizes)
                       if str((i.get('env') or {}).get('ASCEND_ENABLE_USE_FABRIC_MEM')) != '1')
    shortfall = memory_shortfall(total, tp_sizes, mem.get('segment_bytes'), mem.get('local_buffer_bytes'),
                                 mem.get('reserve_bytes'), buffer_ranks)
    if not shortfall:
        return []
    return [_finding(
        host, 'memory', shortfall,
        'Lower mooncake_config_global_segment_size (or the instances and their TP), or add memory. On 910B with '
        'HDK < 25.5 only about 20-32 GiB per NPU can be registered.')]


def _port_owner_finding(host, port, what, holder, fix):
    return _finding(host, 'port', 'port %d (%s) is already held by pid %s: %s (listening on %s)'
                    % (port, what, holder.get('pid') or '?', _cmd(holder.get('cmdline')),
                       ', '.join(holder.get('addresses') or [holder.get('address') or '?'])), fix)


def check_ports(record):
    host = record['host']
    ports = (record.get('facts') or {}).get('ports') or {}
    found = []
    for inst in _started(record):
        port = inst.get('port')
        holder = ports.get(str(port)) or {}
        if holder.get('listening') and not held_by(holder, is_our_vllm, port):
            found.append(_port_owner_finding(
                host, port, 'instance %s' % inst.get('name'), holder,
                'Stop that process, or give instance %s another port (port of vllm_instance_instances).'
                % inst.get('name')))
    master = record.get('master') or {}
    if master.get('is_master'):
        for key, var in (('port', 'mooncake_master_port'), ('metrics_port', 'mooncake_master_metrics_port')):
            port = master.get(key)
            holder = ports.get(str(port)) or {}
            if port and holder.get('listening') and not held_by(holder, is_our_master):
                found.append(_port_owner_finding(
                    host, int(port), 'Mooncake master %s' % key.replace('_', ' '), holder,
                    'Stop that process, or choose another port (%s).' % var))
    return found


def host_path(path, volumes=None):
    """Where a path seen inside the container lies on the host, through the container's ``src:dst[:mode]`` volume
    specs (the longest matching destination wins); the path itself when no volume covers it or without volumes."""
    best = None
    for spec in volumes or []:
        parts = str(spec).split(':')
        if len(parts) < 2 or not parts[0].startswith('/'):
            continue
        src, dst = parts[0].rstrip('/') or '/', parts[1].rstrip('/') or '/'
        if path == dst or path.startswith(dst.rstrip('/') + '/'):
            if best is None or len(dst) > len(best[1]):
                best = (src, dst)
    if best is None:
        return path
    rest = path[len(best[1]):].lstrip('/')
    return best[0].rstrip('/') + ('/' + rest if rest else '') if best[0] != '/' else '/' + rest


def check_model(records, compare_size):
    found, sizes = [], {}
    for record, path in [(r, p) for r in records for p in sorted(set(i.get('model') for i in _started(r)) - {None})]:
        host = record['host']
        on_host = host_path(path, (record.get('container') or {}).get('volumes')
                            if (record.get('container') or {}).get('enabled') else None)
        info = ((record.get('facts') or {}).get('paths') or {}).get(on_host)
        if info is None:
            continue
        if on_host != path:
            path = '%s (on the host: %s)' % (path, on_host)
        if not info.get('exists'):
            found.append(_finding(host, 'model', 'model path %s does not exist' % path,
                                  'Copy the model to %s on this node, or fix vllm_instance_model_path.' % path))
        elif not info.get('is_dir') or not info.get('config'):
            found.append(_finding(host, 'model', 'model path %s has no config.json' % path,
                                  'Point vllm_instance_model_path at the model directory (the one with config.json '
                                  'and the weights), or finish copying it.'))
        elif info.get('size_bytes') is not None:
            sizes.setdefault(path, {})[host] = (info['size_bytes'], info.get('files'))
    if compare_size:
        for path, by_host in sorted(sizes.items()):
            if len(set(v[0] for v in by_host.values())) > 1:
                largest = max(v[0] for v in by_host.values())
                text = ', '.join('%s %d bytes in %s files' % (h, v[0], v[1]) for h, v in sorted(by_host.items()))
                for host, size_files in sorted(by_host.items()):
                    if size_files[0] < largest:
                        found.append(_finding(
                            host, 'model', 'model %s differs in size across nodes (%s)' % (path, text),
                            'Copy the model completely to this node (rsync -a from a node with the full copy), '
                            'or set preflight_compare_model_size=false.'))
    return found


def check_container(record):
    host, cont = record['host'], record.get('container') or {}
    if not cont.get('enabled'):
        return []
    facts = (record.get('facts') or {}).get('container') or {}
    runtime = cont.get('runtime') or 'docker'
    if not facts.get('runtime'):
        return [_finding(host, 'container', 'container runtime %s is not installed (not on PATH)' % runtime,
                         'Install %s on the node, or set vllm_ascend_container_enabled=false to run vllm on the '
                         'host.' % runtime)]
    image = cont.get('image')
    error = (facts.get('errors') or {}).get(image) if image else None
    if error:  # a failed read, never "the image is missing"
        return [_finding(host, 'container', 'cannot tell whether image %s is on the node: %s' % (image, error),
                         'Check that the %s daemon runs and answers (%s image inspect %s on the node), then run '
                         'again.' % (runtime, runtime, image))]
    if image and not (facts.get('images') or {}).get(image):
        return [_finding(host, 'container', 'image %s is not present on the node' % image,
                         'Load or pull it first (%s load -i <file>.tar, or %s pull %s), or fix '
                         'vllm_ascend_container_image.' % (runtime, runtime, image))]
    return []


def hash_seeds(plans):
    """``(host, instance, seed)`` of every instance of ``plans`` (each ``{'host', 'instances'}`` as
    ``vllm_instance_plan`` returns it), in order; the seed as text, ``unset`` when its env has none."""
    out = []
    for plan in plans or []:
        for inst in (plan or {}).get('instances') or []:
            seed = (inst.get('env') or {}).get('PYTHONHASHSEED')
            out.append((plan.get('host'), inst.get('name'), 'unset' if seed in (None, '') else str(seed)))
    return out


def hash_seed_mismatch(plans):
    """``['host/instance=seed', ...]`` of every instance of ``plans`` when their PYTHONHASHSEED values are not all
    the same (vLLM's prefix block hashes then differ, and no instance hits KV blocks another one stored); ``[]``
    when they agree."""
    seeds = hash_seeds(plans)
    if len(set(entry[2] for entry in seeds)) < 2:
        return []
    return ['%s/%s=%s' % entry for entry in seeds]


def check_hash_seed(records):
    found, fixed = [], []
    for record in records:
        instances = []
        for inst in _started(record):
            seed = (inst.get('env') or {}).get('PYTHONHASHSEED')
            if seed in (None, '') or str(seed) == 'random':
                found.append(_finding(
                    record['host'], 'hash_seed',
                    'PYTHONHASHSEED of instance %s is %s: prefix block hashes then differ between processes'
                    % (inst.get('name'), 'unset' if seed in (None, '') else 'random'),
                    'Set vllm_instance_python_hash_seed to one fixed value (the guide works with 0) on every node.'))
            else:
                instances.append(inst)
        fixed.append({'host': record['host'], 'instances': instances})
    differ = hash_seed_mismatch(fixed)
    if differ:
        counts = {}
        for entry in hash_seeds(fixed):
            counts[entry[2]] = counts.get(entry[2], 0) + 1
        common = max(counts, key=counts.get)  # the first seen of the most used seeds
        for entry in hash_seeds(fixed):
            if entry[2] != common:
                found.append(_finding(
                    entry[0], 'hash_seed',
                    'PYTHONHASHSEED differs between instances (%s): cross-node KV hits would silently never happen'
                    % '; '.join(differ),
                    'Set vllm_instance_python_hash_seed (and any PYTHONHASHSEED in vllm_instance_environment) to '
                    'one value for all nodes.'))
    return found


def master_running(records):
    """Whether a master node of the records shows its RPC port held by mooncake_master."""
    for record in records:
        master = record.get('master') or {}
        holder = ((record.get('facts') or {}).get('ports') or {}).get(str(master.get('port'))) or {}
        if master.get('is_master') and holder.get('listening') and held_by(holder, is_our_master):
            return True
    return False


def master_host(master_hosts, hostvars, address=''):
    """The host (name or address) the nodes reach the Mooncake master at: ``address`` when set (the operator's
    override), else the first of ``master_hosts`` (the master group) at its ``mooncake_config_node_address``, else
    its ``ansible_host``, else its inventory name; '' when there is neither an address nor a master host.
    ``hostvars``: Ansible's hostvars (or any mapping of inventory name to that host's variables)."""
    if address:
        return str(address)
    if not master_hosts:
        return ''
    name = master_hosts[0]
    own = hostvars[name] if hostvars and name in hostvars else {}
    for key in ('mooncake_config_node_address', 'ansible_host'):
        if key in own:
            return str(own[key])
    return str(name)


def _port_number(value, option):
    """A TCP port given as a number or its digits (a templated value), else a KvpoolError naming ``option``
    (:func:`_validate.port`)."""
    text = str(value).strip() if isinstance(value, str) else None
    return _validate.port(int(text) if text is not None and text.isdigit() else value, option)


def etcd_endpoint(endpoint, option):
    """``host:port`` of one etcd endpoint (an ``etcd://`` prefix dropped; IPv6 in brackets), else a KvpoolError
    naming ``option``: a host without its port, a scheme, a port out of range. Mooncake's etcd client needs the port
    (``etcd://10.0.0.1`` reaches nothing)."""
    text = str(endpoint).strip()
    text = text[len('etcd://'):] if text.startswith('etcd://') else text
    if '://' in text:  # another scheme: named as such
        _validate.host_address(text, option, example='10.0.0.1:2379')
    if text.startswith('[') and ']:' in text:
        host, port = text[1:].split(']:', 1)
        bracketed = '[%s]' % host
    else:
        host, sep, port = text.rpartition(':')
        bracketed = host
        if not sep or ':' in host or not port.strip().isdigit():
            raise KvpoolError(
                '%s=%r is not host:port: give each etcd endpoint with its client port (for example 10.0.0.1:2379, '
                'an IPv6 address in brackets: [fd00::1]:2379)' % (option, str(endpoint)))
    _validate.host_address(host, option, example='10.0.0.1:2379', empty=False)
    return format_host_port(bracketed, _port_number(port, option))


def master_endpoint(master_hosts, hostvars, port, address='', ha=False, etcd_endpoints=None,
                    address_var='mooncake_config_master_address', port_var='mooncake_config_master_port',
                    endpoints_var='mooncake_config_etcd_endpoints'):
    """mooncake.json's ``master_server_address``: ``host:port`` of :func:`master_host` (IPv6 in brackets), or with
    ``ha`` ``etcd://e1;e2`` of the etcd endpoints (each ``host:port``, :func:`etcd_endpoint`; an ``etcd://`` prefix
    is dropped); '' without ``ha`` when :func:`master_host` finds no master.

    The address must be one host (no port, no scheme: ``10.0.0.1:50051`` gave ``[10.0.0.1:50051]:50051``) and the
    port 1-65535; a KvpoolError names the variable (``address_var``, ``port_var``, ``endpoints_var``) and the fix."""
    if ha:
        endpoints = etcd_endpoints or []
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        return 'etcd://' + ';'.join(etcd_endpoint(e, '%s[%d]' % (endpoints_var, i)) for i, e in enumerate(endpoints))
    host = master_host(master_hosts, hostvars, address)
    if not host:
        return ''
    option = address_var if address else \
        'the address of master host %s (its mooncake_config_node_address, else ansible_host; or set %s)' \
        % (master_hosts[0], address_var)
    _validate.host_address(host, option, port_option=port_var, example='10.0.0.1')
    return format_host_port(host, _port_number(port, port_var))


def check_master(record, severity='error'):
    host, master = record['host'], record.get('master') or {}
    target = master.get('target')
    result = ((record.get('facts') or {}).get('connect') or {}).get(target) if target else None
    if not result or result.get('ok'):
        return []
    again = '' if severity == 'error' else ' (checked again after the master phase, which may restart it)'
    return [_finding(host, 'master', 'cannot reach the Mooncake master at %s: %s%s'
                     % (target, result.get('error'), again),
                     'Check that mooncake_master runs on %s and listens on an address this node reaches '
                     '(mooncake_master_rpc_address), and that no firewall blocks port %s.'
                     % (target.rpartition(':')[0], target.rpartition(':')[2]), severity)]


def check_etcd(record, severity='error'):
    """HA masters: from the node, a majority of the etcd members answers, and their cluster has a quorum (a
    member's ``/health`` is ``{"health":"true"}`` only then).

    Fewer healthy members than a majority of the group, but some healthy: the cluster has its quorum and the others
    do not run yet (a group that grew: the etcd phase starts them and they join), a warning. None healthy while some
    answer: the cluster lost its quorum, an error (``severity``)."""
    host, master = record['host'], record.get('master') or {}
    targets = [str(t) for t in master.get('etcd_targets') or []]
    if not targets:
        return []
    facts = record.get('facts') or {}
    connect, http = facts.get('connect') or {}, facts.get('http') or {}

    def healthy(target):
        answer = http.get('http://%s/health' % target) or {}
        return answer.get('status') == 200 and '"true"' in str(answer.get('body') or '')
    down = ['%s (%s)' % (t, (connect.get(t) or {}).get('error') or 'no answer') for t in targets
            if not (connect.get(t) or {}).get('ok')]
    good = [t for t in targets if healthy(t)]
    sick = [t for t in targets if (connect.get(t) or {}).get('ok') and t not in good]
    need = len(targets) // 2 + 1
    if len(good) >= need:
        return []
    fix = ('Start the etcd members (site.yml --tags etcd, role ascend.kvpool.kvpool_etcd) and check that this node '
           'reaches their client port (kvpool_etcd_address, kvpool_etcd_client_port) through any firewall.')
    if good:
        return [_finding(host, 'master', '%d of the %d etcd members of the HA masters are healthy (%s); not running '
                         'yet: %s. Their cluster has a quorum; the etcd phase starts the others, and members new to '
                         'the group join it' % (len(good), len(targets), ', '.join(good), ', '.join(down + sick)),
                         fix, 'warning')]
    later = '' if severity == 'error' else ' (before the etcd phase: checked again when mooncake.json is written)'
    parts = (['answering but not healthy: %s' % ', '.join(sick)] if sick else []) + \
        (['cannot reach: %s' % ', '.join(down)] if down else [])
    return [_finding(host, 'master', 'the etcd members of the HA masters have no quorum from this node: 0 of %d '
                     'healthy (a majority, %d, is needed); %s%s' % (len(targets), need, '; '.join(parts), later),
                     fix, severity)]


def etcd_running(records):
    """Whether some node reached some etcd member: the HA cluster exists, so a missing majority is an error."""
    for record in records:
        connect = ((record.get('facts') or {}).get('connect') or {})
        if any((connect.get(t) or {}).get('ok') for t in (record.get('master') or {}).get('etcd_targets') or []):
            return True
    return False


def master_reached(records):
    """Whether every record's node connected to its master target (the pre-flight's ``connect`` probe): then a
    check of the master's reachability after the master phase is only needed when that phase changed the master.
    False when a record has no target or no answer (the master check was off, HA masters, a failed probe)."""
    if not records:
        return False
    for record in records:
        target = ((record or {}).get('master') or {}).get('target')
        result = (((record or {}).get('facts') or {}).get('connect') or {}).get(target) if target else None
        if not result or not result.get('ok'):
            return False
    return True


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def check_clock(records, bound):
    clocks = dict((r['host'], (r.get('facts') or {}).get('clock')) for r in records)
    clocks = dict((h, c) for h, c in clocks.items() if c and c.get('offset_s') is not None)
    if len(clocks) < 2:
        return []
    # The controller's clock counts as one more voter: with two nodes it breaks the tie.
    reference = _median([c['offset_s'] for c in clocks.values()] + [0.0])
    found = []
    for host, clock in sorted(clocks.items()):
        skew = clock['offset_s'] - reference
        if abs(skew) > bound + (clock.get('uncertainty_s') or 0.0):
            found.append(_finding(
                host, 'clock', 'clock is %.1f s %s the other nodes (bound %.1f s)'
                % (abs(skew), 'ahead of' if skew > 0 else 'behind', bound),
                'Synchronise the clocks (chronyc tracking / timedatectl; enable chrony or ntpd on every node).'))
    return found


def check_deprecated(record):
    """The plan's warnings about settings the declared release ignores or renamed; the preview warning of the plan
    is the check 'upgrade''s (:func:`check_upgrade`), with its own fix."""
    preview = _profile(record).get('preview')
    return [_finding(record['host'], 'deprecated', text,
                     'Drop or rename the setting for the declared vllm_instance_vllm_ascend_version.', 'warning')
            for text in (record.get('plan') or {}).get('warnings') or []
            if not (preview and str(text).endswith(preview))]


def preflight_findings(records, settings=None):
    """Every finding of every node, errors first; plus counts and one summary text."""
    settings = settings or {}
    checks = settings.get('checks')
    enabled = set(CHECKS if checks is None else checks) | {'facts'}  # an empty list runs no check but 'facts'
    records = [r for r in records or [] if isinstance(r, dict) and r.get('host')]
    found = []
    for record in records:
        facts = record.get('facts') or {}
        if module_failed(facts, 'epoch'):
            found.append(_finding(record['host'], 'facts', 'the node could not be read: %s'
                                  % (facts.get('msg') or 'no result'), 'Fix the error above and re-run.'))
    readable = [r for r in records if not module_failed(r.get('facts'), 'epoch')]
    per_node = [('npu', check_npus), ('memory', check_memory), ('port', check_ports), ('container', check_container),
                ('deprecated', check_deprecated), ('versions', check_versions), ('glibc', check_glibc),
                ('hugepages', check_hugepages), ('adxl_ports', check_adxl_ports), ('hccl_roce', check_hccl_roce),
                ('timeouts', check_timeouts), ('ephemeral_ports', check_ephemeral_ports),
                ('upgrade', lambda record: check_upgrade(record, enabled))]
    if settings.get('master_started'):
        per_node.append(('master', check_master))
    elif master_running(readable):
        per_node.append(('master', lambda record: check_master(record, 'warning')))
    # HA: a majority of the etcd members from every node; before any member runs (a first deploy) only a warning.
    per_node.append(('master', lambda record: check_etcd(
        record, 'error' if settings.get('master_started') or etcd_running(readable) else 'warning')))
    for record in readable:
        for name, check in per_node:
            if name in enabled:
                found.extend(check(record))
    if 'model' in enabled:
        found.extend(check_model(readable, settings.get('compare_model_size', True)))
    if 'hash_seed' in enabled:
        found.extend(check_hash_seed(readable))
    if 'clock' in enabled:
        found.extend(check_clock(readable, float(settings.get('max_clock_skew_s', 2.0))))
    if 'client_ttl' in enabled:
        found.extend(check_client_ttl(readable))
    order = dict((c, i) for i, c in enumerate(CHECKS))
    found.sort(key=lambda f: (f['severity'] != 'error', f['host'], order.get(f['check'], 99)))
    errors = [f for f in found if f['severity'] == 'error']
    lines = ['%s %s %s: %s. Fix: %s' % (f['severity'].upper(), f['host'], f['check'], f['finding'], f['fix'])
             for f in found]
    hosts = sorted(r['host'] for r in records)
    head = ('pre-flight: %d node(s) checked (%s): %d error(s), %d warning(s)'
            % (len(hosts), ', '.join(hosts), len(errors), len(found) - len(errors)))
    return {'ok': not errors, 'errors': len(errors), 'warnings': len(found) - len(errors), 'findings': found,
            'lines': lines, 'summary': '\n'.join([head] + lines)}


# --- release checks (vllm-ascend v0.22 / v0.23 / v0.25, Mooncake 0.3.9 / 0.3.12+) --------------------------------
ADXL_BASE_PORT = 20000   # ADXL (Ascend direct transport) listens on [ASCEND_BASE_PORT, +100] (vllm-ascend #8938)
ADXL_RANGE = 100
ASCEND_TRANSFER_TIMEOUT_MS = 3000   # Mooncake's Ascend transport default
# HCCL's documented defaults (CANN environment variable reference): HCCL_RDMA_TIMEOUT 20, HCCL_RDMA_RETRY_CNT 7.
HCCL_RDMA_TIMEOUT_DEFAULT = 20
HCCL_RDMA_RETRY_CNT_DEFAULT = 7
CLIENT_TTL_SSD_S = 120   # vllm-ascend kv_pool FAQ "SEGMENT_NOT_FOUND (SSD Offload)": --client_ttl=120
CLIENT_TTL_DEFAULT_S = 10
LEASE_DEFAULT_MS_OLD = 5000   # mooncake_master --default_kv_lease_ttl through 0.3.11
LEASE_DEFAULT_MS_NEW = 10000  # from 0.3.12
A2_CHIPS = ('910B',)  # npu-smi Name column of Atlas 800T/I A2 (910B1..910B4); A3 prints 910_93 / Ascend910


def _profile(record):
    return (record.get('plan') or {}).get('profile') or {}


def _requirements(record):
    return _profile(record).get('requirements') or {}


def _pool(record):
    return record.get('pool') or {}


def _env_int(env, name, default=None):
    value = (env or {}).get(name)
    if value in (None, ''):
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        return None


# Libraries a Mooncake master binary may link without its wheel shipping them: what it is, and the fix.
CUDA_RUNTIME = 'libcudart.so.12'
_CUDA_RUNTIME_WHY = ('the CUDA runtime, which the mooncake-transfer-engine-non-cuda 0.3.12.post1 wheel links but does '
                     'not ship (the master stops at once: error while loading shared libraries)')
_CUDA_RUNTIME_FIX = ('Install Mooncake 0.3.13.post1 or 0.3.11.post1 (pip install '
                     'mooncake-transfer-engine-non-cuda==0.3.13.post1; on Ascend the mooncake-transfer-engine-npu '
                     'wheel), or pip install nvidia-cuda-runtime-cu12 and add its lib directory '
                     '(<site-packages>/nvidia/cuda_runtime/lib) to mooncake_master_environment.LD_LIBRARY_PATH')


def check_mooncake_libraries(record):
    """The shared libraries the master's binary links and its node lacks (``preflight_facts`` ``mooncake_libraries``,
    read on the master's hosts): each an error, as the master cannot start without it. A console script that leads
    to no binary is a warning; a master not found at all is left to the master's own start, which names it."""
    host = record['host']
    libs = (record.get('facts') or {}).get('mooncake_libraries')
    if not isinstance(libs, dict):
        return []
    binary, wrapper = libs.get('binary'), libs.get('wrapper')
    unread = [_finding(host, 'versions', 'the Mooncake master\'s libraries could not be read: %s' % libs['error'],
                       'Check that mooncake_master runs on this node (mooncake_master --help), and reinstall '
                       'Mooncake if it does not.', 'warning')] if libs.get('error') else []
    if not binary:
        return unread
    where = 'mooncake_master %s%s' % (binary, ' (run by %s)' % wrapper if wrapper else '')
    wheels = ', '.join(libs.get('wheels') or [])
    raw = dict((str(line).split()[0], line) for line in libs.get('raw') or [] if str(line).split())
    found = []
    for lib in libs.get('missing') or []:
        text = '%s cannot start: it links %s, which the dynamic loader does not find (ldd: %s)' % (
            where, lib, raw.get(lib) or '%s => not found' % lib)
        if lib == CUDA_RUNTIME:
            text += '; %s is %s' % (lib, _CUDA_RUNTIME_WHY)
            fix = _CUDA_RUNTIME_FIX
        else:
            fix = ('Install the package of the node\'s OS (or the wheel) that provides %s, or add the directory that '
                   'holds it to mooncake_master_environment.LD_LIBRARY_PATH' % lib)
        found.append(_finding(host, 'versions', text + ('; installed here: %s' % wheels if wheels else ''), fix + '.'))
    return found + unread


def check_versions(record):
    """CANN, driver (HDK) and the declared Mooncake version against the declared vllm-ascend release's floors:
    below is an error, unreadable a warning (the version files of the guide's mounts); and the libraries the master's
    binary lacks on its hosts (:func:`check_mooncake_libraries`, whether or not instances run there)."""
    host, profile, req = record['host'], _profile(record), _requirements(record)
    ascend = (record.get('facts') or {}).get('ascend')
    libraries = check_mooncake_libraries(record)
    if not req or not _started(record):
        return libraries
    release = profile.get('version') or req.get('line')
    found = libraries
    if ascend is not None:
        container = (record.get('container') or {}).get('enabled')
        items = [('HDK driver', (ascend.get('driver') or {}), req.get('hdk'),
                  'Upgrade the Ascend driver (HDK) on this node to %s or later (vllm-ascend %s, %s)'
                  % (req.get('hdk'), release, (profile.get('npu_type') or 'a2').upper()))]
        if not container:  # in a container the toolkit is the image's, not the host's
            items.append(('CANN toolkit', (ascend.get('toolkit') or {}), req.get('cann'),
                          'Install CANN %s or later (the toolkit vllm-ascend %s is built against), or declare the '
                          'release that runs (vllm_instance_vllm_ascend_version)' % (req.get('cann'), release)))
        for what, info, floor, fix in items:
            if not floor:
                continue
            version = info.get('version')
            present = info.get('exists') if 'exists' in info else bool(info.get('path'))
            where = info.get('path') or 'ascend_toolkit_install.info under /usr/local/Ascend'
            if version is None:
                found.append(_finding(
                    host, 'versions', '%s version unknown: %s' % (what, info.get('error') or '%s %s' % (
                        where, 'has no version line' if present else 'not found')),
                    ('Mount or install the driver (the guide mounts /usr/local/Ascend/driver/version.info and '
                     '/etc/ascend_install.info into the container)' if what.startswith('HDK') else
                     'Install the CANN toolkit (or point preflight at its install record)')
                    + '; vllm-ascend %s needs %s %s or later' % (release, what, floor), 'warning'))
            elif compare_versions(version, floor) == -1:
                found.append(_finding(host, 'versions', '%s %s (%s) is below %s, which vllm-ascend %s needs'
                                      % (what, version, where, floor, release), fix + '.'))
            elif compare_versions(version, floor) is None:
                found.append(_finding(host, 'versions', '%s version %r (%s) cannot be compared with %s'
                                      % (what, version, where, floor),
                                      'Check the file; vllm-ascend %s needs %s %s or later.' % (release, what, floor),
                                      'warning'))
    declared = (record.get('master') or {}).get('mooncake_version')
    floor = req.get('mooncake')
    if declared and floor and compare_versions(declared, floor) == -1:
        found.append(_finding(host, 'versions', 'Mooncake %s (mooncake_master_mooncake_version) is below %s, which '
                              'vllm-ascend %s needs' % (declared, floor, release),
                              'Install Mooncake %s or later (ascend.kvpool.mooncake_install: mooncake-transfer-engine-'
                              'npu), and declare it in mooncake_master_mooncake_version.' % floor))
    found.extend(upstream_reports(record))
    return found


def upstream_reports(record):
    """Open-ended upstream reports about the declared combination, as a warning that says what upstream says and
    no more. Mooncake #3749 (closed, no maintainer answer or fix visible): on 910B (A2), Mooncake 0.3.12.post1 with
    vllm-ascend v0.25.0, put succeeded and transfers failed, with ASCEND_BUFFER_POOL=0:0 and
    HCCL_INTRA_ROCE_ENABLE=1 set by the reporter (not a prescribed fix; 0:0 is Mooncake's default)."""
    host, profile, req = record['host'], _profile(record), _requirements(record)
    declared = str((record.get('master') or {}).get('mooncake_version') or '')
    if (not _started(record) or req.get('line') != 'v0.25' or (profile.get('npu_type') or 'a2') != 'a2'
            or not (compare_versions(declared, '0.3.12') in (0, 1) and compare_versions(declared, '0.3.13') == -1)):
        return []
    return [_finding(
        host, 'versions', 'Mooncake %s (mooncake_master_mooncake_version) with vllm-ascend %s on A2: Mooncake issue '
        '#3749 reports put succeeding and transfers failing with Mooncake 0.3.12.post1 and vllm-ascend v0.25.0 on '
        '910B over device RoCE, with ASCEND_BUFFER_POOL=0:0 and HCCL_INTRA_ROCE_ENABLE=1 set by the reporter; the '
        'issue is closed without a maintainer\'s answer or a fix, and upstream prescribes no setting for it'
        % (declared, profile.get('version') or req.get('line')),
        'Nothing to set from upstream: ASCEND_BUFFER_POOL=0:0 is the same as unset (Mooncake\'s default). The '
        'images of vllm-ascend v0.25 ship Mooncake 0.3.11.post1; if the pool probe shows puts without gets, try '
        'that release (mooncake_install) and declare it in mooncake_master_mooncake_version.', 'warning')]


def check_glibc(record):
    """The glibc the mooncake-transfer-engine-npu wheel needs (v0.23+: 2.35), on the host (in a container the
    image's glibc counts, not checked here)."""
    host, req = record['host'], _requirements(record)
    glibc = (record.get('facts') or {}).get('glibc')
    floor = req.get('glibc')
    if glibc is None or not floor or not _started(record) or (record.get('container') or {}).get('enabled'):
        return []
    version = glibc.get('version')
    if version is None:
        return [_finding(host, 'glibc', 'glibc version unknown (ldd --version: %r)' % (glibc.get('raw') or ''),
                         'Check ldd --version on the node: the mooncake-transfer-engine-npu wheel needs glibc %s or '
                         'later.' % floor, 'warning')]
    if compare_versions(version, floor) == -1:
        return [_finding(host, 'glibc', 'glibc %s (%s) is older than the %s the mooncake-transfer-engine-npu wheel of '
                         'vllm-ascend %s needs' % (version, glibc.get('raw') or glibc.get('source'), floor,
                                                   _profile(record).get('version')),
                         'Run the instances in the vllm-ascend image (vllm_ascend_container_enabled), or upgrade the '
                         'OS (glibc %s: Ubuntu 22.04, openEuler 24.03), or build Mooncake from source.' % floor)]
    return []


def hugepages_needed(record):
    """(bytes of huge pages the node needs, why) or (0, '') when the check does not apply.

    ``pool.hugepages``: ``auto`` needs them where vllm-ascend's kv_pool guide reserves them (``echo 200000 >
    /proc/sys/vm/nr_hugepages``: v0.23+ on A2, protocol ascend, HCCL_INTRA_ROCE_ENABLE=1 direct transfer): every
    TP rank's global segment (the collection's estimate: 200000 2 MiB pages = 390 GiB for the guide's TP 4 x 100
    GiB); a number is bytes needed as given; 0 switches the check off."""
    pool, profile = _pool(record), _profile(record)
    wanted = pool.get('hugepages', 'auto')
    started = _started(record)
    if not started:
        return 0, ''
    if str(wanted) != 'auto':
        try:
            return int(wanted), 'preflight_hugepages'
        except (TypeError, ValueError):
            return 0, ''
    roce = any(str((i.get('env') or {}).get('HCCL_INTRA_ROCE_ENABLE')) == '1' for i in started)
    if pool.get('protocol', 'ascend') != 'ascend' or not profile.get('roce_direct') or not roce:
        return 0, ''
    ranks = sum(int(i.get('tensor_parallel_size') or len(i.get('devices') or [])) for i in started)
    segment = int((record.get('memory') or {}).get('segment_bytes') or 0)
    return ranks * segment, ('%d TP rank(s) x global_segment_size %s (HCCL_INTRA_ROCE_ENABLE=1, vllm-ascend %s)'
                             % (ranks, _gib_size(segment), profile.get('version')))


def check_hugepages(record):
    host = record['host']
    needed, why = hugepages_needed(record)
    mem = (record.get('facts') or {}).get('memory') or {}
    if not needed or 'HugePages_Total' not in mem:
        return []
    size = int(mem.get('Hugepagesize') or 2097152)
    have = int(mem.get('HugePages_Total') or 0) * size
    if have >= needed:
        return []
    pages = -(-needed // size)
    return [_finding(host, 'hugepages', 'HugePages_Total %d x %d kB = %s of huge pages, but %s need %s'
                     % (int(mem.get('HugePages_Total') or 0), size // 1024, _gib(have), why, _gib(needed)),
                     'Reserve them before the instances start: echo %d > /proc/sys/vm/nr_hugepages (and '
                     'vm.nr_hugepages in /etc/sysctl.d to keep it), or lower mooncake_config_global_segment_size; '
                     'preflight_hugepages: 0 switches the check off.' % pages)]


def adxl_range(env):
    """[first, last] of the ADXL listen range for an instance environment (``ASCEND_BASE_PORT`` moves it)."""
    base = _env_int(env, 'ASCEND_BASE_PORT', ADXL_BASE_PORT)
    base = ADXL_BASE_PORT if base is None else base
    return base, base + ADXL_RANGE


def plan_ports(record):
    """[(port, what)] of every port the plan uses on this node: the instances' API ports, their kv_ports
    (kv-transfer-config ``kv_port``), the master's RPC and metrics ports on its node, and ``extra_ports`` (other
    services of the node, e.g. the router's when it exists)."""
    out = []
    for inst in _started(record):
        if inst.get('port'):
            out.append((int(inst['port']), 'port of instance %s' % inst.get('name')))
        kv_port = (inst.get('kv_transfer_config') or {}).get('kv_port')
        if kv_port not in (None, '') and str(kv_port).isdigit():
            out.append((int(kv_port), 'kv_port of instance %s' % inst.get('name')))
    master = record.get('master') or {}
    if master.get('is_master'):
        out.append((int(master.get('port') or 0), 'Mooncake master RPC port (mooncake_master_port)'))
        out.append((int(master.get('metrics_port') or 0),
                    'Mooncake master metrics port (mooncake_master_metrics_port)'))
    for port, what in sorted((record.get('extra_ports') or {}).items(), key=lambda kv: str(kv[0])):
        if str(port).isdigit():
            out.append((int(port), str(what)))
    return [(p, w) for p, w in out if p]


def check_ephemeral_ports(record):
    """A port of the plan inside the node's ephemeral port range (``net.ipv4.ip_local_port_range``, 32768-60999 by
    default) and not reserved from it (``net.ipv4.ip_local_reserved_ports``): any outgoing connection of the node can
    take it as its local port, and keeps it through TIME-WAIT (60 s). A service that binds it then fails: measured
    on the mock cluster, mooncake_master exits with status 1 and no message (the guide's 50088 lies in the default
    range), and systemd gives up after its restart limit, well within those 60 s. A warning, one per node."""
    host = record['host']
    ephemeral = (record.get('facts') or {}).get('ephemeral') or {}
    port_range, reserved = ephemeral.get('range'), ephemeral.get('reserved') or []
    if not port_range:
        return []
    clash = sorted(set((p, w) for p, w in plan_ports(record) if ephemeral_unreserved(p, port_range, reserved)))
    if not clash:
        return []
    ports = sorted(set(port for port, what in clash))
    value = reserved_ports_text(reserved, ports)
    return [_finding(
        host, 'ephemeral_ports', '%s inside the ephemeral port range %d-%d and not reserved: an outgoing connection '
        'of the node can hold the port (also for 60 s of TIME-WAIT after it closes), and a service binding it then '
        'fails to start (mooncake_master exits with status 1 and no message)'
        % ('; '.join('%s %d' % (w, p) for p, w in clash) + (' is' if len(clash) == 1 else ' are'),
           port_range[0], port_range[1]),
        'Reserve the port(s) on the node: sysctl -w net.ipv4.ip_local_reserved_ports=%s, and keep that line '
        '(net.ipv4.ip_local_reserved_ports = %s) in a file of /etc/sysctl.d/; or choose ports below %d.'
        % (value, value, port_range[0]), 'warning')]


def check_adxl_ports(record):
    """A port of the plan inside ADXL's listen range of an instance on the node: ``ZMQError: Address already in
    use`` at random starts (vllm-ascend #8938). Only with protocol ascend (the ADXL transport)."""
    host = record['host']
    started = _started(record)
    if _pool(record).get('protocol', 'ascend') != 'ascend' or not started:
        return []
    ranges = sorted(set(adxl_range(i.get('env')) for i in started))
    found = []
    for port, what in plan_ports(record):
        for first, last in ranges:
            if first <= port <= last:
                found.append(_finding(
                    host, 'adxl_ports', '%s %d is inside the ADXL listen range [%d, %d] of the instances (Mooncake\'s '
                    'Ascend transport binds there at random: ZMQError: Address already in use, vllm-ascend #8938)'
                    % (what, port, first, last),
                    'Move the port out of [%d, %d] (e.g. kv_port 30000 or above), or move the range with '
                    'ASCEND_BASE_PORT in vllm_instance_environment (e.g. 22000).' % (first, last)))
    return found


def check_hccl_roce(record):
    """v0.23+ with protocol ascend on A2 NPUs (npu-smi's 910B chips, or vllm_instance_npu_type a2) without
    HCCL_INTRA_ROCE_ENABLE=1, which the tags' kv_pool.md call "Required by direct transmission scheme on 800 I/T A2
    series" (v0.23.0 and v0.25.1rc1)."""
    host, profile = record['host'], _profile(record)
    if (not profile or not profile.get('roce_direct')
            or _pool(record).get('protocol', 'ascend') != 'ascend'):
        return []
    chips = sorted(set(str(e.get('name') or '') for e in (record.get('npu') or {}).get('npus') or []
                       if isinstance(e, dict) and e.get('name')))
    a2 = any(c.startswith(A2_CHIPS) for c in chips) if chips else profile.get('npu_type') == 'a2'
    if not a2:
        return []
    found = []
    for inst in _started(record):
        value = (inst.get('env') or {}).get('HCCL_INTRA_ROCE_ENABLE')
        if str(value) != '1':
            found.append(_finding(
                host, 'hccl_roce', 'instance %s runs on A2 NPUs (%s) with protocol ascend and vllm-ascend %s, but '
                'HCCL_INTRA_ROCE_ENABLE is %s, which that release\'s kv_pool.md calls required for the direct '
                'transfer on A2 (Mooncake\'s Ascend transport reads it as its RoCE switch)'
                % (inst.get('name'), ', '.join(chips) or 'vllm_instance_npu_type a2', profile.get('version'),
                   'unset' if value in (None, '') else repr(str(value))),
                'Set vllm_instance_npu_type: a2 (renders HCCL_INTRA_ROCE_ENABLE=1) and drop any other '
                'HCCL_INTRA_ROCE_ENABLE from vllm_instance_environment.'))
    return found


def lease_ttl_ms(master):
    """The master's --default_kv_lease_ttl in ms: the configured value, else the binary's default by version."""
    value = int((master or {}).get('lease_ttl_ms') or 0)
    if value > 0:
        return value, 'mooncake_master_default_kv_lease_ttl'
    try:
        parsed = parse_mooncake_version((master or {}).get('mooncake_version'))
    except ValueError:
        parsed = None
    if parsed is not None and parsed >= (0, 3, 12):
        return LEASE_DEFAULT_MS_NEW, 'the default of Mooncake %s' % master.get('mooncake_version')
    return LEASE_DEFAULT_MS_OLD, 'the default of Mooncake %s' % ((master or {}).get('mooncake_version') or '< 0.3.12')


def check_timeouts(record):
    """ASCEND_TRANSFER_TIMEOUT below the RDMA retry budget (4.096 us x 2^HCCL_RDMA_TIMEOUT x HCCL_RDMA_RETRY_CNT),
    judged when the instance sets HCCL_RDMA_TIMEOUT or HCCL_RDMA_RETRY_CNT; and the master's lease below
    ASCEND_CONNECT_TIMEOUT / ASCEND_TRANSFER_TIMEOUT (LEASE_EXPIRED, -707). Only with protocol ascend."""
    host = record['host']
    if _pool(record).get('protocol', 'ascend') != 'ascend':
        return []
    lease, lease_from = lease_ttl_ms(record.get('master'))
    found = []
    for inst in _started(record):
        env, name = inst.get('env') or {}, inst.get('name')
        names = ('ASCEND_TRANSFER_TIMEOUT', 'HCCL_RDMA_TIMEOUT', 'HCCL_RDMA_RETRY_CNT', 'ASCEND_CONNECT_TIMEOUT')
        values = dict((n, _env_int(env, n)) for n in names)
        bad = [n for n in names if env.get(n) not in (None, '') and values[n] is None]
        for n in bad:
            found.append(_finding(host, 'timeouts', 'instance %s: %s=%r is not a whole number' % (name, n, env.get(n)),
                                  'Set %s to a whole number (milliseconds for the ASCEND_ ones).' % n))
        if bad:
            continue
        transfer = values['ASCEND_TRANSFER_TIMEOUT']
        # The budget is judged when the instance sets the RDMA retry variables (HCCL's defaults for the other one).
        if any(env.get(n) not in (None, '') for n in names[1:3]):
            rdma_timeout = values['HCCL_RDMA_TIMEOUT']
            rdma_timeout = HCCL_RDMA_TIMEOUT_DEFAULT if rdma_timeout is None else rdma_timeout
            retries = values['HCCL_RDMA_RETRY_CNT']
            retries = HCCL_RDMA_RETRY_CNT_DEFAULT if retries is None else retries
            budget_ms = 4.096e-3 * (2 ** rdma_timeout) * retries
            effective = ASCEND_TRANSFER_TIMEOUT_MS if transfer is None else transfer
            if effective < budget_ms:
                found.append(_finding(
                    host, 'timeouts', 'instance %s: ASCEND_TRANSFER_TIMEOUT %d ms%s is below the RDMA retry budget '
                    '4.096 us x 2^%d (HCCL_RDMA_TIMEOUT) x %d (HCCL_RDMA_RETRY_CNT) = %.0f ms: transfers time out '
                    '(Sync batch data transfer timeout, status 103900-103902) while RDMA still retries'
                    % (name, effective, '' if transfer is not None else ' (default)', rdma_timeout, retries, budget_ms),
                    'Raise ASCEND_TRANSFER_TIMEOUT above %.0f ms, or lower HCCL_RDMA_TIMEOUT / HCCL_RDMA_RETRY_CNT '
                    '(vllm_instance_environment); keep the master\'s lease above it.' % budget_ms))
        for n, default in (('ASCEND_CONNECT_TIMEOUT', None), ('ASCEND_TRANSFER_TIMEOUT', ASCEND_TRANSFER_TIMEOUT_MS)):
            value = values[n] if values[n] is not None else default
            if value is not None and lease <= value:
                found.append(_finding(
                    host, 'timeouts', 'instance %s: the master\'s default_kv_lease_ttl %d ms (%s) is not above '
                    '%s %d ms%s: objects expire mid-transfer under load (LEASE_EXPIRED, -707)'
                    % (name, lease, lease_from, n, value, '' if values[n] is not None else ' (default)'),
                    'Set mooncake_master_default_kv_lease_ttl above %d ms (vllm-ascend\'s docs use 11000), or lower %s.'
                    % (value, n)))
    return found


def check_client_ttl(records):
    """With SSD offload on, the master's --client_ttl below what vllm-ascend's docs recommend (120 s): SSD offload
    stops with SEGMENT_NOT_FOUND after the ping thread misses beats (kv_pool FAQ, Issue 2). Named on the master's
    node, a warning (a recommendation)."""
    if not any(_pool(r).get('ssd_offload') for r in records):
        return []
    found = []
    for record in records:
        master = record.get('master') or {}
        if not master.get('is_master'):
            continue
        ttl = int(master.get('client_ttl_s') or 0)
        effective = ttl or CLIENT_TTL_DEFAULT_S
        if effective < CLIENT_TTL_SSD_S:
            found.append(_finding(
                record['host'], 'client_ttl', 'SSD offload is on (enable_ssd_offload) and the master\'s client_ttl is '
                '%d s%s, below the %d s vllm-ascend recommends: SEGMENT_NOT_FOUND stops the offload after a missed '
                'heartbeat' % (effective, '' if ttl else ' (default)', CLIENT_TTL_SSD_S),
                'Set mooncake_master_client_ttl: %d.' % CLIENT_TTL_SSD_S, 'warning'))
    return found


# --- the version chain (check 'upgrade'): the target release against what the node has and what runs now ----------
# The checks whose findings are known-bad combinations of the target release with the node (vendor versions and the
# Mooncake floor, Mooncake #3749, the master's libraries; glibc for the wheel; HCCL_INTRA_ROCE_ENABLE on A2): 'upgrade'
# runs each one that is not enabled under its own name and reports its findings as its own, so a plan that runs
# 'upgrade' alone (upgrade.yml) still refuses them, and the default list shows each once.
CHAIN_CHECKS = (('versions', check_versions), ('glibc', check_glibc), ('hccl_roce', check_hccl_roce))
# Suffixes of the vllm-ascend image tags after the version (quay.io/ascend/vllm-ascend:<version>-a3, -openeuler).
_IMAGE_VARIANTS = ('-openeuler', '-a3')


def _vllm_plan():
    # imported on first use, as compare_versions: vllm_plan is large (see there)
    from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan

    return vllm_plan


def version_url(inst):
    """The URL of an instance's ``GET /version`` as its own node asks it (the plan's ``endpoint``: a wildcard bind
    at loopback), '' without one. The probe (role preflight, ``preflight_facts`` ``http``) reads exactly these."""
    base = inst.get('endpoint') or inst.get('url') or ''
    return base.rstrip('/') + '/version' if base else ''


def parse_vllm_version(body):
    """``(major, minor, patch)`` of the vLLM release in a ``GET /version`` answer (``{"version": "0.23.0"}``; a
    PEP 440 tail such as ``rc1``, ``.dev12+g1234`` or the stand-in's ``+sim`` is dropped), or None when the body is
    no such answer. vllm-ascend vX.Y.Z* runs on vLLM X.Y.Z (its versioning policy), so the triple names the
    vllm-ascend release up to its rc/post suffix. Never raises."""
    try:
        doc = json.loads(body) if isinstance(body, (str, bytes)) else body
    except (TypeError, ValueError):
        return None
    text = doc.get('version') if isinstance(doc, dict) else None
    if not isinstance(text, str):
        return None
    m = re.match(r'^\s*v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?![\d])', text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def image_release(image):
    """The vllm-ascend version a container image's tag names (``quay.io/ascend/vllm-ascend:v0.23.0-a3`` ->
    ``v0.23.0``), or '' when the tag names none (``latest``, a digest, a local build)."""
    ref = str(image or '').split('@', 1)[0]
    name, sep, tag = ref.rpartition(':')
    if not sep or '/' in tag:
        return ''
    changed = True
    while changed:
        changed = False
        for variant in _IMAGE_VARIANTS:
            if tag.endswith(variant):
                tag, changed = tag[:-len(variant)], True
    return tag if re.match(r'^v\d+\.\d+\.\d+(rc\d+|\.post\d+)?$', tag) else ''


def cold_pool_text(old, new):
    """What a release change does to the pool, for the finding (one text: the upgrade and the downgrade)."""
    return ('the pool will be cold after the change: the objects the instances of %s put are not hit by %s (vLLM\'s '
            'MooncakeStoreConnector embeds a config fingerprint in its store keys, and the block hashes the keys are '
            'made of may change between vLLM releases), so until the new release has put them again every first '
            'request of a prefix recomputes its prefill (the TTFT of no pool: the guide\'s 2322 ms against 739-948 '
            'ms with hits) and the old objects only take space until they are evicted; while a rollout mixes the two '
            'releases, instances of one do not hit what the other put' % (old, new))


def running_release_findings(record, target):
    """One finding per running instance of the node whose release (``GET /version``) differs from ``target``
    (``(major, minor, patch)``), or cannot be read. Instances that do not run now give none: nothing to compare,
    and a first start's pool is empty anyway."""
    host = record['host']
    http = (record.get('facts') or {}).get('http') or {}
    running = running_instances(record)
    found = []
    target_text = 'vllm-ascend %s' % _profile(record).get('version')
    for inst in _started(record):
        if inst.get('name') not in running:
            continue
        url = version_url(inst)
        answer = http.get(url) if url else None
        if not isinstance(answer, dict):
            continue  # not asked (an older role, or no URL): nothing read, nothing said
        now = parse_vllm_version(answer.get('body')) if answer.get('status') == 200 else None
        if now is None:
            found.append(_finding(
                host, 'upgrade', 'instance %s runs, but the release it runs is unknown (GET %s: %s), so whether this '
                'run changes it cannot be told; if it does, %s' % (
                    inst.get('name'), url, 'status %s' % answer.get('status') if answer.get('status') else
                    'no answer', cold_pool_text('the running release', target_text)),
                'Check that the instance answers GET /version (vLLM serves it without the API key); when this run '
                'changes the release, roll it out one node at a time (upgrade.yml) at a quiet hour.', 'warning'))
            continue
        if now == tuple(target[:3]):
            continue
        old = 'vLLM %d.%d.%d (vllm-ascend v%d.%d.%d*)' % (now + now)
        down = now > tuple(target[:3])
        found.append(_finding(
            host, 'upgrade', 'instance %s runs %s (GET /version) and this run changes it to %s: a %s; %s' % (
                inst.get('name'), old, target_text, 'downgrade' if down else 'release change',
                cold_pool_text(old, target_text)),
            ('A rollback is the same playbook with the old values; check that the older image or install is on the '
             'node, and ' if down else 'Expected with an upgrade: ') +
            'change one node at a time behind the router (upgrade.yml) at a quiet hour, and let the common prefixes '
            'be put again before the next node (or declare the running release, vllm_instance_vllm_ascend_version, to '
            'change nothing).', 'warning'))
    return found


def image_findings(record):
    """The container image's tag against the declared release: the settings are rendered for the declared release,
    so an image of another release line runs with the wrong ones (an error); another version of the same line a
    warning (its CANN and Mooncake may differ)."""
    host, profile, cont, vp = record['host'], _profile(record), record.get('container') or {}, _vllm_plan()
    tagged = image_release(cont.get('image')) if cont.get('enabled') else ''
    if not tagged or not profile.get('version') or vp.parse_version(tagged) == vp.parse_version(profile['version']):
        return []
    line = vp.version_profile(tagged, profile.get('npu_type') or 'a2')['release']
    same = line == profile.get('release')
    return [_finding(
        host, 'upgrade', 'the container image %s is vllm-ascend %s, but the settings are rendered for %s '
        '(vllm_instance_vllm_ascend_version)%s' % (
            cont.get('image'), tagged, profile.get('version'),
            ', the same release line (%s)' % line if same else
            ': the %s line reads another environment and Mooncake install than the %s line rendered'
            % (line, profile.get('release'))),
        'Set vllm_ascend_container_image to the declared release\'s image (quay.io/ascend/vllm-ascend:%s, -a3 on A3), '
        'or declare the image\'s release (vllm_instance_vllm_ascend_version: %s).' % (profile.get('version'), tagged),
        'warning' if same else 'error')]


def check_upgrade(record, enabled=()):
    """The version chain of the node, before anything changes: the target release (the plan's, i.e. the declared
    vllm_instance_vllm_ascend_version) against

    - what the node has: the checks of ``CHAIN_CHECKS`` that are not enabled under their own names (their findings
      relabelled 'upgrade'), and the container image's tag (:func:`image_findings`);
    - the release table: a preview (``vllm_plan.preview_warning``, vllm-ascend #14757), a warning;
    - what runs now (:func:`running_release_findings`): a release change leaves the pool cold, a warning; a
      downgrade too (a rollback is legitimate); an unknown running release a warning.
    """
    host, profile = record['host'], _profile(record)
    if not profile or not _started(record):
        return []
    found = []
    for name, check in CHAIN_CHECKS:
        if name not in enabled:
            found.extend(dict(f, check='upgrade') for f in check(record))
    found.extend(image_findings(record))
    if profile.get('preview'):
        found.append(_finding(host, 'upgrade', profile['preview'],
                              'Declare the final release (vllm_instance_vllm_ascend_version: %s) for production; keep '
                              'the preview for trials only, or wait for 0.26.' % _vllm_plan().DEFAULT_VERSION,
                              'warning'))
    target = _vllm_plan().parse_version(profile.get('version'))
    if target is not None:
        found.extend(running_release_findings(record, target))
    return found
