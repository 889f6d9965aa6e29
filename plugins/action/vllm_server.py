# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of ascend.kvpool.vllm_server: host mode is one call of the module; in container mode the
instance's container is made by community.docker.docker_container between two calls of the module
(plugin_utils/service_container.py). The API key reaches docker_container's ``env`` from the no_log option
``api_key`` only, and is masked in whatever docker_container answers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.plugin_utils.service_container import ServiceAction


class ActionModule(ServiceAction):
    MODULE = 'ascend.kvpool.vllm_server'
    SECRETS = {'VLLM_API_KEY': 'api_key'}
