# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of ascend.kvpool.preflight_facts: runs the module and brackets it with the controller's clock.

The node's clock offset is its ``epoch`` minus the controller's clock at the same instant, estimated as NTP does:
the module reads ``epoch`` and then probes for ``probe_s`` seconds, so of the round trip ``after - before`` the
transport (ssh, interpreter start, result) takes ``after - before - probe_s``; half of it lies before ``epoch``,
and that half is also the uncertainty.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        before = time.time()
        result.update(self._execute_module(module_name='ascend.kvpool.preflight_facts',
                                           module_args=self._task.args, task_vars=task_vars))
        after = time.time()
        if 'epoch' in result:
            probing = min(max(float(result.get('probe_s') or 0.0), 0.0), after - before)
            transport = (after - before - probing) / 2.0
            result['clock'] = {'offset_s': round(result['epoch'] - (before + transport), 3),
                               'uncertainty_s': round(transport, 3)}
        return result
