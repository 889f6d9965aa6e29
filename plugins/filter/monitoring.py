# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter of the Prometheus targets: a thin adapter over ``plugins/plugin_utils/monitoring.py``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

monitoring = lazy.module('plugin_utils.monitoring')


def kvpool_monitoring_targets(settings, hostvars, groups):
    """The file_sd target groups of one cluster (see ``monitoring.monitoring_targets``)."""
    try:
        return monitoring.monitoring_targets(settings, hostvars, groups)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    """ascend.kvpool monitoring filters."""

    def filters(self):
        return {'kvpool_monitoring_targets': kvpool_monitoring_targets}
