# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the NPU network verification (the logic lives in plugin_utils/npu_network.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

npu_network = lazy.module('plugin_utils.npu_network')


def hccn_ping_targets(ips_by_node, node, strategy='same_index', k=None, seed=0,
                      round_=None):
    """Ping targets of ``node``: see plugin_utils.npu_network.ping_plan. ``round_`` None or empty: the UTC day
    number (plugin_utils.npu_network.default_round). ``k`` None: SAMPLED_K_DEFAULT."""
    if k is None:
        k = npu_network.SAMPLED_K_DEFAULT
    try:
        return npu_network.hccn_ping_targets(ips_by_node, node, strategy, k, seed, ping_round(round_))
    except ValueError as e:
        raise AnsibleFilterError(str(e)) from e


def ping_round(value=None):
    """The rotation round of the sampled strategy: ``value`` when set, else the UTC day number."""
    if value is None or value == '':
        return npu_network.default_round()
    try:
        return int(value)
    except (TypeError, ValueError) as e:
        raise AnsibleFilterError('npu_network_ping_round must be an integer or empty, got %r' % (value,)) from e


def npu_network_input_errors(hosts, hostvars, devices, checks, groups=None, flap_threshold=0):
    """Input check of every host of ``hosts`` at once: each host's own npu_network_devices / npu_network_checks /
    npu_network_npu_groups / npu_network_link_flap_threshold (inventory, extra vars), else the play's values.
    See plugin_utils.npu_network.input_errors."""
    play = (('npu_network_devices', devices), ('npu_network_checks', checks),
            ('npu_network_npu_groups', [] if groups is None else groups),
            ('npu_network_link_flap_threshold', flap_threshold))
    values = {}
    for host in hosts or []:
        own = hostvars.get(host) or {}
        values[host] = tuple(own[name] if name in own else value for name, value in play)
    return npu_network.input_errors(values)


class FilterModule(object):
    """ascend.kvpool network filters."""

    def filters(self):
        return {
            'hccn_ping_targets': hccn_ping_targets,
            'npu_network_ping_round': ping_round,
            'npu_network_input_errors': npu_network_input_errors,
        }
