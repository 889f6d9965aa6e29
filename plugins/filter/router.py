# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the router (role ascend.kvpool.kvpool_router): thin adapters over plugin_utils/router_plan.py and
plugin_utils/router_policy.py; the policy choice's warnings are shown as Ansible warnings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

_router = lazy.module('module_utils._router')
router_policy = lazy.module('plugin_utils.router_policy')
router_plan = lazy.module('plugin_utils.router_plan')

display = Display()


def kvpool_router_workers(hosts, hostvars, urls=None):
    """Sorted base URLs of every instance (not stopped) of ``hosts``, or the explicit ``urls``."""
    try:
        return router_plan.router_workers(list(hosts or []), hostvars, list(urls or []))
    except router_plan.RouterPlanError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def kvpool_router_policy(requested, render=None, allow_unsafe=False, warn=True, tokenize=None, release=''):
    """The policy to run (``policy``, ``reason``, ``warnings``, ``error``) from the requested one and the render
    probe's status codes per worker (render, and /tokenize where render is absent); ``release`` (the declared
    vllm-ascend version) decides when no worker answered."""
    requested = str(requested or 'auto')
    if requested != 'auto' and requested not in _router.POLICIES:
        raise AnsibleFilterError('kvpool_router_policy=%r is not a policy: use auto or one of %s'
                                 % (requested, ', '.join(_router.POLICIES)))
    choice = router_policy.resolve_policy(requested, dict(render or {}), bool(allow_unsafe), dict(tokenize or {}),
                                          str(release or ''))
    if warn:
        for message in choice['warnings']:
            display.warning(message)
    return choice


class FilterModule(object):
    """ascend.kvpool router filters."""

    def filters(self):
        return {
            'kvpool_router_workers': kvpool_router_workers,
            'kvpool_router_policy': kvpool_router_policy,
        }
