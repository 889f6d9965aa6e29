# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter of the pre-flight checks (the logic lives in plugin_utils/preflight.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.plugin_utils.preflight import (
    host_path,
    master_reached,
    preflight_findings,
)


class FilterModule(object):
    """ascend.kvpool pre-flight filters."""

    def filters(self):
        return {'preflight_findings': preflight_findings, 'preflight_host_path': host_path,
                'preflight_master_reached': master_reached}
