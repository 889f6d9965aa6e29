# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the vLLM instances: thin adapters over ``plugins/plugin_utils/vllm_plan.py`` (the per-host plan, the
instances' status, the role variables of the vllm serve flags); the plan's warnings (settings the declared
vllm-ascend version ignores) are also shown as Ansible warnings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

vllm_plan = lazy.module('plugin_utils.vllm_plan')

display = Display()


def vllm_instance_plan(instances, settings, host='this host', warn=True):
    """Plan of ``instances`` (the role's ``vllm_instance_instances``) with the role-level ``settings``.

    Returns a dict: ``instances`` (each with its rendered kv_transfer_config, env, argv inputs, and where it
    answers: ``address``, ``url``, ``endpoint``, ``loopback``), ``devices``, ``ports``, ``total_tp``, ``warnings``,
    ``errors``, ``node_address``, ``version``, ``profile``.
    """
    if not isinstance(settings, dict):
        raise AnsibleFilterError('vllm_instance_plan: settings must be a dict, got %s' % type(settings).__name__)
    plan = vllm_plan.plan_instances(instances, settings, str(host))
    if warn:
        for message in plan['warnings']:
            display.warning(message)
    return plan


def vllm_serve_flag_vars(role='vllm_instance'):
    """The role variables of the ``vllm serve`` flags of the table (``module_utils/_vllm.py`` ``SERVE_FLAGS``) that
    the role sets: ``<role>_<flag>`` for each flag the plan does not derive from an instance's entry."""
    return ['%s_%s' % (role, name) for name in vllm_plan.ROLE_FLAGS]


class FilterModule(object):
    """ascend.kvpool vLLM instance filters."""

    def filters(self):
        return {
            'vllm_instance_plan': vllm_instance_plan,
            'vllm_instance_status': lazy.function('plugin_utils.vllm_plan', 'vllm_instance_status'),
            'vllm_serve_flag_vars': vllm_serve_flag_vars,
        }
