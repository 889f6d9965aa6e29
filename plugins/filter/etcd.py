# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the etcd members (role ascend.kvpool.kvpool_etcd) and the HA masters: thin adapters over
module_utils/_etcd.py and module_utils/_mooncake.py (the failover drill's kill target)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

_etcd = lazy.module('module_utils._etcd')
_mooncake = lazy.module('module_utils._mooncake')
format_host_port = lazy.function('module_utils._shared', 'format_host_port')


def _var(hostvars, host, name, default):
    try:
        value = hostvars[host].get(name)
    except (KeyError, AttributeError):
        value = None
    return default if value is None or value == '' else value


def etcd_members(hosts, hostvars, peer_port=None, client_port=None):
    """``[{name, address, peer_port, client_port}]`` of the etcd ``hosts`` in their order, from each host's
    ``kvpool_etcd_name`` / ``kvpool_etcd_address`` / ``kvpool_etcd_peer_port`` / ``kvpool_etcd_client_port`` (else the
    inventory name, ``ansible_host`` and the given ports; etcd's defaults when not given)."""
    from ansible_collections.ascend.kvpool.plugins.module_utils._shared import ETCD_CLIENT_PORT, ETCD_PEER_PORT

    peer_port = ETCD_PEER_PORT if peer_port is None else peer_port
    client_port = ETCD_CLIENT_PORT if client_port is None else client_port
    out = []
    for host in list(hosts or []):
        address = _var(hostvars, host, 'kvpool_etcd_address', _var(hostvars, host, 'ansible_host', host))
        try:
            out.append({'name': str(_var(hostvars, host, 'kvpool_etcd_name', host)), 'address': str(address),
                        'peer_port': int(_var(hostvars, host, 'kvpool_etcd_peer_port', peer_port)),
                        'client_port': int(_var(hostvars, host, 'kvpool_etcd_client_port', client_port))})
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError('%s: kvpool_etcd_peer_port / kvpool_etcd_client_port must be port numbers (%s)'
                                     % (host, exc)) from exc
    return out


def etcd_members_problem(members):
    """'' when the members make a cluster, else what is wrong and the fix."""
    return _etcd.members_problem(list(members or []))


def etcd_endpoints(members):
    """``host:port`` of every member's client URL (what Mooncake's ``etcd://`` address lists)."""
    return [format_host_port(m['address'], m['client_port']) for m in list(members or [])]


def master_ha_peers(hosts, hostvars, me, port=50088, metrics_port=9003):
    """``[{name, rpc, health}]`` of the HA masters of ``hosts`` other than ``me``, each where it listens: its
    ``mooncake_master_rpc_address`` (else ``ansible_host``, else the name) and ``mooncake_master_metrics_address``
    (else the RPC address), with the given ports."""
    out = []
    for host in list(hosts or []):
        if host == me:
            continue
        rpc = str(_var(hostvars, host, 'mooncake_master_rpc_address', _var(hostvars, host, 'ansible_host', host)))
        metrics = str(_var(hostvars, host, 'mooncake_master_metrics_address', rpc))
        out.append({'name': str(host), 'rpc': format_host_port(rpc, int(port)),
                    'health': 'http://%s/health' % format_host_port(metrics, int(metrics_port))})
    return out


def master_kill_target(inspect, container, cgroup=None, systemd=False, host=None):
    """``{pid, id}`` of the main process of the master's service container that the failover drill may signal, from
    the registered ``docker inspect`` (and, to confirm, the registered read of ``/proc/<pid>/cgroup``); an error
    naming the container and the fix when it is not running, its pid is 1 or less, or the pid is not its process.

    ``systemd=True`` (host mode): ``inspect`` is the registered ``systemctl show -p
    LoadState,ActiveState,SubState,MainPID <unit>`` and ``container`` the unit; ``{pid, unit}`` of a unit that is
    loaded, active and has a main process, else an error naming the unit and the fix. ``host`` names the host in the
    messages."""
    try:
        if systemd:
            if cgroup is not None:
                raise ValueError('cgroup is for container mode; with systemd=true the unit\'s processes are '
                                 'signalled by systemd')
            return _mooncake.unit_kill_target(inspect, container, host)
        return _mooncake.container_kill_target(inspect, container, cgroup, host)
    except ValueError as exc:
        raise AnsibleFilterError('master_kill_target: %s' % exc) from exc


class FilterModule(object):
    """ascend.kvpool etcd filters."""

    def filters(self):
        return {
            'etcd_members': etcd_members,
            'etcd_members_problem': etcd_members_problem,
            'etcd_endpoints': etcd_endpoints,
            'master_ha_peers': master_ha_peers,
            'master_kill_target': master_kill_target,
        }
