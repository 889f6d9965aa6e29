# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter of the pre-flight checks (the logic lives in plugin_utils/preflight.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy


class FilterModule(object):
    """ascend.kvpool pre-flight filters."""

    def filters(self):
        return {'preflight_findings': lazy.function('plugin_utils.preflight', 'preflight_findings'),
                'preflight_host_path': lazy.function('plugin_utils.preflight', 'host_path'),
                'preflight_master_reached': lazy.function('plugin_utils.preflight', 'master_reached')}
