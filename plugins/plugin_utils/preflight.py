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
     'master': {'is_master': bool, 'target': 'host:port' or '', 'port': 50088, 'metrics_port': 9003},
     'container': {'enabled': bool, 'image': '...', 'runtime': 'docker'}}

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

import os

from ansible_collections.ascend.kvpool.plugins.module_utils._mooncake import format_host_port

GIB = 1073741824.0
CHECKS = ('facts', 'npu', 'memory', 'port', 'model', 'container', 'hash_seed', 'master', 'clock', 'deprecated')


def _finding(host, check, finding, fix, severity='error'):
    return {'host': host, 'check': check, 'severity': severity, 'finding': finding, 'fix': fix}


def _gib(value):
    return '%.1f GiB' % (value / GIB)


def _started(record):
    return [i for i in ((record.get('plan') or {}).get('instances') or []) if i.get('state', 'started') == 'started']


def _cmd(cmdline):
    return ' '.join(cmdline or [])[:160] or 'unreadable'


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


def memory_needed(tp_sizes, segment_bytes, buffer_bytes, reserve_bytes=0):
    """Bytes of host memory a node's share of the pool needs: every TP rank of every instance (``tp_sizes``: the
    tensor parallel size of each instance) runs its own Mooncake store client, which registers a global segment and
    a local buffer in host DRAM; plus the reserve kept free beside the pool."""
    ranks = sum(int(tp) for tp in tp_sizes or [])
    return ranks * (int(segment_bytes or 0) + int(buffer_bytes or 0)) + int(reserve_bytes or 0)


def memory_shortfall(mem_total, tp_sizes, segment_bytes, buffer_bytes, reserve_bytes=0):
    """'' when :func:`memory_needed` fits in ``mem_total`` (bytes, /proc/meminfo's MemTotal); otherwise what does
    not fit, for the operator: ``2 instance(s) x TP 4 x (global_segment_size 100 GiB + local_buffer_size 1 GiB) +
    reserve 8 GiB needs 816.0 GiB, but MemTotal is 23.5 GiB`` (``with 6 TP rank(s) in all`` instead of ``x TP 4``
    when the instances' TP sizes differ). The caller adds the host and the fix naming its own variables."""
    tp_sizes = [int(tp) for tp in tp_sizes or []]
    needed = memory_needed(tp_sizes, segment_bytes, buffer_bytes, reserve_bytes)
    if needed <= int(mem_total):
        return ''
    if tp_sizes and len(set(tp_sizes)) == 1:
        ranks = 'x TP %d' % tp_sizes[0]
    else:
        ranks = 'with %d TP rank(s) in all' % sum(tp_sizes)
    return ('%d instance(s) %s x (global_segment_size %s + local_buffer_size %s) + reserve %s needs %s, '
            'but MemTotal is %s' % (len(tp_sizes), ranks, _gib_size(segment_bytes), _gib_size(buffer_bytes),
                                    _gib_size(reserve_bytes), _gib(needed), _gib(int(mem_total))))


def check_memory(record):
    host = record['host']
    mem = record.get('memory') or {}
    total = ((record.get('facts') or {}).get('memory') or {}).get('MemTotal')
    started = _started(record)
    if not total or not started or not mem:
        return []
    shortfall = memory_shortfall(
        total, [i.get('tensor_parallel_size') or len(i.get('devices') or []) for i in started],
        mem.get('segment_bytes'), mem.get('local_buffer_bytes'), mem.get('reserve_bytes'))
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


def master_endpoint(master_hosts, hostvars, port, address='', ha=False, etcd_endpoints=None):
    """mooncake.json's ``master_server_address``: ``host:port`` of :func:`master_host` (IPv6 in brackets), or with
    ``ha`` ``etcd://e1;e2`` of the etcd endpoints (an ``etcd://`` prefix of an endpoint is dropped); '' without
    ``ha`` when :func:`master_host` finds no master."""
    if ha:
        endpoints = [str(e) for e in etcd_endpoints or []]
        return 'etcd://' + ';'.join(e[len('etcd://'):] if e.startswith('etcd://') else e for e in endpoints)
    host = master_host(master_hosts, hostvars, address)
    return format_host_port(host, port) if host else ''


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
    return [_finding(record['host'], 'deprecated', text,
                     'Drop or rename the setting for the declared vllm_instance_vllm_ascend_version.', 'warning')
            for text in (record.get('plan') or {}).get('warnings') or []]


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
                ('deprecated', check_deprecated)]
    if settings.get('master_started'):
        per_node.append(('master', check_master))
    elif master_running(readable):
        per_node.append(('master', lambda record: check_master(record, 'warning')))
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
