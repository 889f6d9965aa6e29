# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the NPU network verification (the logic lives in plugin_utils/npu_network.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.plugin_utils import npu_network


def hccn_ping_targets(ips_by_node, node, strategy='same_index'):
    """Ping targets of ``node``: see plugin_utils.npu_network.hccn_ping_targets."""
    try:
        return npu_network.hccn_ping_targets(ips_by_node, node, strategy)
    except ValueError as e:
        raise AnsibleFilterError(str(e)) from e


class FilterModule(object):
    """ascend.kvpool network filters."""

    def filters(self):
        return {
            'hccn_ping_targets': hccn_ping_targets,
            'npu_network_report': npu_network.npu_network_report,
        }
