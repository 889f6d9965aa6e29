# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test helper (not a test module): the fact ``vllm_instance_plan`` of each host as role vllm_instance's
tasks/preflight.yml publishes it - the same function (``plan_instances``) with the same settings, read from that
task file, the role's defaults and each host's inventory variables - for the tests of the plan's readers (router,
monitoring, benchmark)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re
from pathlib import Path

import yaml

from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan

ROOT = Path(__file__).resolve().parents[3]
_ROLE = ROOT / 'roles' / 'vllm_instance'
_DEFAULTS = yaml.safe_load((_ROLE / 'defaults' / 'main.yml').read_text())
_SHARED = yaml.safe_load((ROOT / 'roles' / 'kvpool_defaults' / 'defaults' / 'main.yml').read_text())
_TASK = yaml.safe_load((_ROLE / 'tasks' / 'preflight.yml').read_text())[0]
# settings key -> the role variable the task passes ("{{ vllm_instance_X }}"), or the template itself.
SETTINGS = dict((key, value.strip()) for key, value in _TASK['vars']['vllm_instance__settings'].items())
_VAR = re.compile(r'^\{\{ (vllm_instance_\w+) \}\}$')


def _default(name, node_address):
    """The role default of ``name`` as Ansible renders it for a host whose ansible_host is ``node_address``."""
    value = copy.deepcopy(_DEFAULTS[name])
    if name == 'vllm_instance_instances':
        return [dict(i, port=_SHARED['kvpool_defaults_instance_port']) for i in value]
    if isinstance(value, str) and '{{' in value:
        return {'vllm_instance_listen_host': node_address,
                'vllm_instance_mooncake_config_path': _SHARED['kvpool_defaults_mooncake_config_path'],
                # kvpool_defaults_store_cluster_id without HA masters (the readers' tests run none)
                'vllm_instance_mooncake_cluster_id': ''}[name]
    return value


def host_plan(host, hostvars):
    """``vllm_instance_plan`` of ``host`` from its inventory variables ``hostvars`` (a dict)."""
    node_address = hostvars.get('ansible_host') or host

    def var(name):
        return hostvars[name] if name in hostvars else _default(name, node_address)

    settings = {}
    for key, template in SETTINGS.items():
        if key == 'serve_flags':  # the table's role variables (filter vllm_serve_flag_vars, lookup vars)
            settings[key] = dict((name, var(name)) for name in vllm_plan.ROLE_FLAG_VARS)
            continue
        m = _VAR.match(template)
        if m:
            settings[key] = var(m.group(1))
        elif 'mooncake_config_node_address' in template:  # data_address: that variable, else ansible_host
            settings[key] = hostvars.get('mooncake_config_node_address') or node_address
        else:
            settings[key] = node_address  # node_address: ansible_host | default(host)
    return vllm_plan.plan_instances(var('vllm_instance_instances'), settings, host)


def planned(hostvars, hosts=None):
    """A copy of ``hostvars`` with the fact ``vllm_instance_plan`` on each of ``hosts`` (default: every host)."""
    out = copy.deepcopy(hostvars)
    for host in hosts if hosts is not None else list(out):
        out[host]['vllm_instance_plan'] = host_plan(host, out[host])
    return out
