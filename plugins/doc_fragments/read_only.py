# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Attributes of the modules that only read a node (hccn_facts, hccn_ping, npu_smi_facts, preflight_facts)."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: The module only reads, so it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to diff.
  idempotent:
    support: full
    description: Reads only; running it again gives the same result for the same node state.
"""
