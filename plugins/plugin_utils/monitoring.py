# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side plan of the Prometheus targets (role ascend.kvpool.kvpool_monitoring): one ``file_sd`` group
per Mooncake master, per vLLM instance of every node and per router, labelled ``cluster``, ``node``, ``service``,
``instance`` (``<node>/<service>``) and ``role`` (``mooncake_master``, ``vllm_instance``, ``router``); masters and
instances also ``pool_address``, the node's one data-plane address (``mooncake_config_node_address``, else
``ansible_host``: the instances' ``VLLM_HOST_IP``), while they are scraped at their HTTP address.

Routers: the hosts of the router group (the caller's ``router_group``, else the shared default's) with
``kvpool_router_enabled`` true (role kvpool_router, site.yml's router phase), plus any router URL listed in
``kvpool_monitoring_routers``.

The instances are those of the plan that role ``ascend.kvpool.vllm_instance`` published on each node (the fact
``vllm_instance_plan``, which monitoring.yml computes from the inventory first): their names, addresses and ports
are the plan's, never recomputed here. The rest is read from the inventory: the group's hosts, ``ansible_host``,
the master's ``mooncake_master_metrics_port`` / ``mooncake_master_metrics_address`` and the router hosts'
``kvpool_router_*``. Pure functions of plain data, unit-tested without a cluster (the filter
``kvpool_monitoring_targets`` is a thin adapter).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.ascend.kvpool.plugins.module_utils._shared import (
    format_host_port, is_loopback, is_port, reach_address,
)
from ansible_collections.ascend.kvpool.plugins.plugin_utils.bench_plan import DEFAULT_KEYS, shared_defaults
from ansible_collections.ascend.kvpool.plugins.plugin_utils.vllm_plan import loopback_only

# The shared defaults this plan needs (settings['defaults'], from role kvpool_defaults, checked by shared_defaults):
# the benchmark plan's, and the router group and metrics port (role kvpool_router's defaults are not in hostvars:
# read from there when the inventory sets none).
MONITORING_DEFAULT_KEYS = DEFAULT_KEYS + ('router_group', 'router_prometheus_port')
ROUTER_SERVICE = 'router'
ROLES = ('mooncake_master', 'vllm_instance', 'router')
MASTER_SERVICE = 'mooncake-master'
_URL = re.compile(r'^(?:(?P<scheme>https?)://)?(?P<host>\[[^\]]+\]|[^/:\[\]]+)(?::(?P<port>\d+))?(?P<path>/.*)?$')
_LABEL_NAME = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*$')


def _get(hostvars, host, key, default=None):
    try:
        value = hostvars[host].get(key, default) if host in hostvars else default
    except Exception:  # pylint: disable=broad-except  # an undefined template in someone's inventory
        value = default
    return default if value is None else value


def _scrape_address(address, hostvars, host):
    """Where Prometheus reaches a server bound to ``address`` on ``host`` (the shared rule: a wildcard bind is
    reached at the host's own address, ``ansible_host``, else the inventory name)."""
    return reach_address(address, _get(hostvars, host, 'ansible_host', host))


def _pool_address(hostvars, host):
    """The node's one data-plane address, where its Mooncake clients (and a master it runs) are reached in the pool:
    ``mooncake_config_node_address``, else ``ansible_host``, else the inventory name (the rule of
    ``preflight.master_host`` and of the plan's ``data_address``)."""
    return str(_get(hostvars, host, 'mooncake_config_node_address', '') or _get(hostvars, host, 'ansible_host', host))


def _group(target, labels):
    return {'targets': [target], 'labels': labels}


def _labels(cluster, node, service, role, extra):
    labels = dict(extra or {})
    labels.update({'cluster': cluster, 'node': node, 'service': service, 'instance': '%s/%s' % (node, service),
                   'role': role})
    return labels


def _instances_of(hostvars, host):
    """``([instance, ...], error)``: the host's started instances from its plan (the fact ``vllm_instance_plan``,
    each with ``name``, ``port``, ``address`` and ``loopback``, and ``pool_address``: the plan's ``data_address``),
    or an error naming the host and the fix."""
    plan = _get(hostvars, host, 'vllm_instance_plan', None)
    if not isinstance(plan, dict) or not isinstance(plan.get('instances'), list):
        return [], ('%s: no vllm_instance_plan (the instances planned by role ascend.kvpool.vllm_instance). Plan them '
                    'first in the same run: monitoring.yml does, or run that role\'s tasks_from preflight.yml on the '
                    'node group' % host)
    return [dict(i, pool_address=plan.get('data_address')) for i in plan['instances']
            if isinstance(i, dict) and i.get('state', 'started') == 'started'], None


def parse_router(spec, index):
    """``(name, address, port, scheme, path, error)`` of one router of the ``routers`` list: a URL string
    (``http://10.0.0.5:29000``, the router's Prometheus port) or a dict ``{url, name, node}``."""
    if isinstance(spec, dict):
        url, name, node = spec.get('url'), spec.get('name'), spec.get('node')
    else:
        url, name, node = spec, None, None
    m = _URL.match(str(url or '').strip())
    if not m or not m.group('port'):
        return None, 'routers[%d]: %r is not a URL with a port (http://HOST:PORT, the router\'s Prometheus ' \
            'port)' % (index, url)
    port = int(m.group('port'))
    if not is_port(port):
        return None, 'routers[%d]: port %d is not a TCP port 1-65535' % (index, port)
    address = m.group('host').strip('[]')
    return {'name': str(name or ('router' if index == 0 else 'router-%d' % index)),
            'node': str(node or address), 'address': address, 'port': port,
            'scheme': m.group('scheme') or 'http', 'path': m.group('path') or '/metrics'}, None


def _truthy(value):
    return value is True or str(value).strip().lower() in ('true', 'yes', 'on', '1')


def _deployed_routers(settings, hostvars, groups, cluster, extra, out):
    """The routers role kvpool_router runs (site.yml's router phase): every host of the router group whose
    ``kvpool_router_enabled`` is true, scraped at ``kvpool_router_prometheus_host``, else ``kvpool_router_host``
    (the role's default for it), else the host's ``ansible_host``, and ``kvpool_router_prometheus_port``. A
    loopback metrics address is refused: no Prometheus on another host can reach it."""
    defaults = settings['defaults']
    group = settings.get('router_group') or defaults['router_group']
    for host in groups.get(group) or []:
        if not _truthy(_get(hostvars, host, 'kvpool_router_enabled', False)):
            continue
        port = _get(hostvars, host, 'kvpool_router_prometheus_port', defaults['router_prometheus_port'])
        if not is_port(port):
            out['errors'].append('%s: kvpool_router_prometheus_port %r is not a TCP port 1-65535' % (host, port))
            continue
        name, bind = 'kvpool_router_prometheus_host', _get(hostvars, host, 'kvpool_router_prometheus_host', '')
        if bind in ('', None):
            name, bind = 'kvpool_router_host', _get(hostvars, host, 'kvpool_router_host', '')
        address = _scrape_address(bind, hostvars, host)
        if is_loopback(address) and host != settings.get('monitoring_host'):
            out['errors'].append(
                '%s: %s is %s: the router\'s metrics answer on loopback only, where no Prometheus on another host '
                'reaches them. Set kvpool_router_prometheus_host to an address of %s (by default the role binds '
                'them at the router\'s own address), and run site.yml --tags router' % (host, name, address, host))
            continue
        labels = _labels(cluster, host, ROUTER_SERVICE, 'router', extra)
        out['router'].append(_group(format_host_port(address, port), labels))


def monitoring_targets(settings, hostvars, groups):
    """The ``file_sd`` target groups of one cluster, by role: ``{'mooncake_master': [...], 'vllm_instance': [...],
    'router': [...], 'errors': [...], 'counts': {...}}``.

    ``settings``: the role's variables without the ``kvpool_monitoring_`` prefix (``cluster``, ``node_group``,
    ``master_group``, ``router_group``, ``routers``, ``labels``; ``monitoring_host``, the inventory name of the
    host the role runs on: only its own servers may be scraped at a loopback address) and ``defaults`` (the
    ``kvpool_defaults_`` values, keys :data:`MONITORING_DEFAULT_KEYS`). Raises ValueError when the settings are not
    a dict or lack a default.
    """
    defaults = shared_defaults(settings, 'kvpool_monitoring_targets', MONITORING_DEFAULT_KEYS)
    hostvars = hostvars or {}
    groups = groups or {}
    errors = []
    cluster = str(settings.get('cluster') or 'kvpool')
    extra = settings.get('labels') or {}
    if not isinstance(extra, dict):
        errors.append('kvpool_monitoring_labels must be a dict of label names to values, got %r' % (extra,))
        extra = {}
    bad = sorted(k for k in extra if not _LABEL_NAME.match(str(k)) or str(k).startswith('__'))
    if bad:
        errors.append('kvpool_monitoring_labels: %s not valid Prometheus label name(s)' % ', '.join(bad))
    taken = sorted(set(extra) & {'cluster', 'node', 'service', 'instance', 'role', 'pool_address'})
    if taken:
        errors.append('kvpool_monitoring_labels: %s set by the role itself' % ', '.join(taken))
    extra = dict((str(k), str(v)) for k, v in extra.items())
    out = {'mooncake_master': [], 'vllm_instance': [], 'router': [], 'errors': errors}

    master_group = settings.get('master_group') or defaults['master_group']
    for host in groups.get(master_group) or []:
        port = _get(hostvars, host, 'mooncake_master_metrics_port', defaults['master_metrics_port'])
        if not is_port(port):
            errors.append('%s: mooncake_master_metrics_port %r is not a TCP port 1-65535' % (host, port))
            continue
        address = _scrape_address(_get(hostvars, host, 'mooncake_master_metrics_address', ''), hostvars, host)
        if is_loopback(address) and host != settings.get('monitoring_host'):
            errors.append('%s: mooncake_master_metrics_address is %s: the master\'s metrics answer on loopback only, '
                          'where no Prometheus on another host reaches them. Set it to an address of %s (or leave it '
                          'empty: every address) and run site.yml --tags master' % (host, address, host))
            continue
        labels = _labels(cluster, host, MASTER_SERVICE, 'mooncake_master', extra)
        labels['pool_address'] = _pool_address(hostvars, host)
        out['mooncake_master'].append(_group(format_host_port(address, port), labels))
    if not out['mooncake_master'] and not errors:
        errors.append('no host in the master group %r: the pool has no master to scrape (set '
                      'kvpool_monitoring_master_group)' % master_group)

    node_group = settings.get('node_group') or defaults['node_group']
    seen = {}
    for host in groups.get(node_group) or []:
        instances, error = _instances_of(hostvars, host)
        if error:
            errors.append(error)
            continue
        for inst in instances:
            name, port, address = inst.get('name'), inst.get('port'), inst.get('address')
            if not is_port(port) or not address:
                errors.append('%s: instance %s: port %r is not a TCP port 1-65535' % (host, name, port))
                continue
            if inst.get('loopback') and host != settings.get('monitoring_host'):
                errors.append(loopback_only(host, inst, 'Prometheus'))
                continue
            target = format_host_port(address, port)
            if target in seen:
                errors.append('%s: instance %s is scraped at %s, as %s already is' % (host, name, target, seen[target]))
                continue
            seen[target] = '%s/%s' % (host, name)
            labels = _labels(cluster, host, str(name), 'vllm_instance', extra)
            # Where the instance's Mooncake segments register (its VLLM_HOST_IP, the plan's data_address).
            labels['pool_address'] = str(inst.get('pool_address') or _pool_address(hostvars, host))
            out['vllm_instance'].append(_group(target, labels))

    _deployed_routers(settings, hostvars, groups, cluster, extra, out)
    routers = settings.get('routers') or []
    if not isinstance(routers, list):
        errors.append('kvpool_monitoring_routers must be a list of URLs, got %r' % (routers,))
        routers = []
    for index, spec in enumerate(routers):
        router, error = parse_router(spec, index)
        if error:
            errors.append(error)
            continue
        labels = _labels(cluster, router['node'], router['name'], 'router', extra)
        if router['scheme'] != 'http':
            labels['__scheme__'] = router['scheme']
        if router['path'] != '/metrics':
            labels['__metrics_path__'] = router['path']
        out['router'].append(_group(format_host_port(router['address'], router['port']), labels))
    out['counts'] = dict((role, len(out[role])) for role in ROLES)
    return out
