# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The router's workers from the inventory (pure, controller side): every instance of every host of a group, from
the plan that role ``ascend.kvpool.vllm_instance`` published on each host (``vllm_instance_plan``). The plan says
where each instance answers (its ``url``) and whether it answers its own host only (``loopback``): this module
applies no address rule of its own."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.plugin_utils.vllm_plan import loopback_only


class RouterPlanError(ValueError):
    """A message for the operator: what is wrong, where, and the fix."""


def router_workers(hosts, hostvars, urls=None):
    """Sorted base URLs (``http://HOST:PORT``) of every instance that is not stopped on ``hosts``.

    ``urls`` (the operator's explicit list) wins when not empty. Each instance's URL is its plan's ``url`` (an
    instance bound to every address is reached at its host's ``ansible_host``, else its inventory name). Raises
    RouterPlanError naming the host and the fix.
    """
    if urls:
        return sorted(set(str(u).rstrip('/') for u in urls))
    out = set()
    missing = []
    for host in hosts or []:
        hv = (hostvars or {}).get(host) or {}
        plan = hv.get('vllm_instance_plan')
        if not isinstance(plan, dict):
            missing.append(str(host))
            continue
        for inst in plan.get('instances') or []:
            if inst.get('state') == 'stopped' or not inst.get('port'):
                continue
            if inst.get('loopback'):
                raise RouterPlanError('kvpool_router: %s; or list the worker URLs in kvpool_router_worker_urls'
                                      % loopback_only(host, inst, 'the router'))
            out.add(inst['url'])
    if missing:
        raise RouterPlanError(
            'kvpool_router: host(s) %s of the worker group have no vllm_instance_plan (the instances planned by role '
            'ascend.kvpool.vllm_instance in this run). Run that role on them first (site.yml does), or list the '
            'instances in kvpool_router_worker_urls' % ', '.join(missing))
    if not out:
        raise RouterPlanError(
            'kvpool_router: no instance to route to on %s (every one is stopped, or kvpool_router_worker_group names '
            'an empty or missing group). Start instances, set kvpool_router_worker_group, or list the instances in '
            'kvpool_router_worker_urls' % (', '.join(str(h) for h in hosts or []) or 'the worker group'))
    return sorted(out)
