# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side plan of the TTFT benchmark (role ascend.kvpool.kvpool_benchmark): which instances play 1 and
2, the master's /metrics, where the load runs, the seeds.

The instances are those of the plan that role ``ascend.kvpool.vllm_instance`` published on each node (the fact
``vllm_instance_plan``, which benchmark.yml computes from the inventory first): their names, URLs and models are
the plan's, never recomputed here. The rest is read from the inventory: the group's hosts, ``ansible_host``, and
the master's ``mooncake_master_metrics_port``. Everything can be overridden by the role's variables. Pure
functions of plain data, unit-tested without a cluster (the filter is a thin adapter).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random

from ansible_collections.ascend.kvpool.plugins.module_utils._shared import base_url
from ansible_collections.ascend.kvpool.plugins.plugin_utils.vllm_plan import instance_name, instance_where

# The shared defaults this plan needs (settings['defaults'], from role kvpool_defaults: their one source).
DEFAULT_KEYS = ('node_group', 'master_group', 'master_metrics_port')


def _get(hostvars, host, key, default=None):
    try:
        value = hostvars[host].get(key, default) if host in hostvars else default
    except Exception:  # pylint: disable=broad-except  # an undefined template in someone's inventory
        value = default
    return default if value is None else value


def _pick(instances, which):
    if not instances:
        return None, 'no instance planned'
    if isinstance(which, int) or (isinstance(which, str) and which.isdigit()):
        index = int(which)
        if index >= len(instances):
            return None, 'instance index %d out of range (%d planned)' % (index, len(instances))
        return instances[index], None
    for entry in instances:
        if entry.get('name') == which:
            return entry, None
    return None, 'no instance named %s' % which


def resolve_instance(spec, default_host, hostvars, role):
    """One of the guide's two instances, from the host's plan (``vllm_instance_plan``) and the role's overrides
    (``url``, else ``port`` / ``address`` / ``name``): ``{'role', 'host', 'name', 'address', 'port', 'url', 'model',
    'error'}``."""
    spec = dict(spec or {})
    host = spec.get('host') or default_host
    out = {'role': role, 'host': host, 'name': None, 'address': None, 'port': None, 'url': None, 'model': None,
           'error': None}
    if spec.get('url'):
        url = str(spec['url']).rstrip('/')
        out.update(url=url if '://' in url else 'http://' + url, name=spec.get('name'))
        return out
    if not host:
        out['error'] = ('%s: no host: set kvpool_benchmark_%s.host (or .url), or put two hosts in '
                        'kvpool_benchmark_group' % (role, role))
        return out
    plan = _get(hostvars, host, 'vllm_instance_plan', None)
    if not isinstance(plan, dict) or not isinstance(plan.get('instances'), list):
        out['error'] = ('%s: %s has no vllm_instance_plan (the instances planned by role ascend.kvpool.vllm_instance): '
                        'plan them first in the same run (benchmark.yml does, for the node group), or set '
                        'kvpool_benchmark_%s.url' % (role, host, role))
        return out
    entry, error = _pick(plan['instances'], spec.get('instance', 0))
    if entry is None and not spec.get('port'):
        out['error'] = '%s: %s on %s; set kvpool_benchmark_%s.port or .url' % (role, error, host, role)
        return out
    entry = entry or {}
    where = entry
    if spec.get('port') or spec.get('address'):
        # The operator's override, with the plan's rule for a wildcard address.
        where = instance_where(spec.get('address') or entry.get('host'), spec.get('port') or entry.get('port'),
                               plan.get('node_address') or host)
    port = int(spec.get('port') or entry.get('port'))
    name = spec.get('name') or entry.get('name') or instance_name(port)
    out.update(name=name, address=str(where['address']), port=port, url=where['url'], model=entry.get('model'))
    return out


def shared_defaults(settings, who, keys=DEFAULT_KEYS):
    """``settings['defaults']`` (the kvpool_defaults_ values, ``keys``: by default :data:`DEFAULT_KEYS`) of a
    plan's settings; ValueError naming ``who`` when the settings are not a dict or lack a default. Shared by the
    plans that read the shared defaults (this one, plugin_utils/monitoring.py)."""
    if not isinstance(settings, dict):
        raise ValueError('%s: settings must be a dict' % who)
    defaults = settings.get('defaults')
    missing = [k for k in keys if not isinstance(defaults, dict) or defaults.get(k) in (None, '')]
    if missing:
        raise ValueError('%s: settings.defaults lacks %s (the kvpool_defaults_ values)' % (who, ', '.join(missing)))
    return defaults


def kvpool_benchmark_plan(settings, hostvars, groups):
    """The plan of one run from the role's settings (a dict of the role variables without the prefix, and
    ``defaults``: the shared defaults of role kvpool_defaults, keys :data:`DEFAULT_KEYS`).

    Raises ValueError when the settings are not a dict or lack a default.
    """
    defaults = shared_defaults(settings, 'kvpool_benchmark_plan')
    errors = []
    group = settings.get('group') or defaults['node_group']
    hosts = list((groups or {}).get(group) or [])
    first = hosts[0] if hosts else None
    second = hosts[1] if len(hosts) > 1 else None
    inst1 = resolve_instance(settings.get('instance1'), first, hostvars, 'instance1')
    inst2 = resolve_instance(settings.get('instance2'), second, hostvars, 'instance2')
    for inst in (inst1, inst2):
        if inst['error']:
            errors.append(inst['error'])
    if not errors and inst1['url'] == inst2['url']:
        errors.append('instance1 and instance2 are the same instance (%s): the guide compares two instances on two '
                      'nodes; set kvpool_benchmark_instance2' % inst1['url'])
    master_url = settings.get('master_metrics_url') or ''
    master_host = None
    if master_url == 'none':
        master_url = ''
    elif not master_url:
        master_group = _get(hostvars, first, 'mooncake_master_group', defaults['master_group']) if first else \
            defaults['master_group']
        masters = list((groups or {}).get(master_group) or [])
        if masters:
            master_host = masters[0]
            port = _get(hostvars, master_host, 'mooncake_master_metrics_port', defaults['master_metrics_port'])
            address = _get(hostvars, master_host, 'ansible_host', master_host)
            master_url = base_url(address, port) + '/metrics'
    client = settings.get('client_host') or inst1['host'] or 'localhost'
    seed = int(settings.get('seed') or 0)
    seed_source = 'set'
    if seed == 0:
        seed = random.SystemRandom().randint(1, 2 ** 31 - 2)
        seed_source = 'new for this run'
    num = int(settings.get('num_requests') or 0)
    flush = int(settings.get('flush_requests') or 0) or num
    # AISBench's tokenizer path: the operator's, else the model the instances serve (their plan; instance 1's first:
    # the client runs on its node by default), else vllm_instance_model_path where the inventory sets it.
    model_path, model_path_source = settings.get('aisbench_model_path') or '', 'kvpool_benchmark_aisbench_model_path'
    for inst in (inst1, inst2):
        if not model_path and inst['model']:
            model_path, model_path_source = inst['model'], 'the model %s serves (its plan)' % inst['role']
    if not model_path and inst1['host'] and _get(hostvars, inst1['host'], 'vllm_instance_model_path', ''):
        model_path = _get(hostvars, inst1['host'], 'vllm_instance_model_path', '')
        model_path_source = 'vllm_instance_model_path of %s' % inst1['host']
    if not model_path:
        model_path_source = 'none: set kvpool_benchmark_aisbench_model_path'
    metrics = {}
    if inst1['url']:
        metrics['instance1'] = inst1['url'] + '/metrics'
    if inst2['url']:
        metrics['instance2'] = inst2['url'] + '/metrics'
    if master_url:
        metrics['master'] = master_url
    return {
        'instance1': inst1, 'instance2': inst2, 'master': {'host': master_host, 'metrics_url': master_url or None},
        'metrics_urls': metrics, 'client_host': client, 'seed_a': seed, 'seed_b': seed + 1,
        'seed_source': seed_source, 'flush_requests': flush, 'aisbench_model_path': model_path or '',
        'aisbench_model_path_source': model_path_source,
        'errors': errors,
    }
