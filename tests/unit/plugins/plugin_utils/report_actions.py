# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a controller report action plugin as the controller does, without a connection (tests' helper)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase


class FakeTask(object):
    def __init__(self, args):
        self.args = args
        self.check_mode = False


def run_report_action(monkeypatch, plugin_cls, args, task_vars):
    """A report action as the controller runs it: no connection, the task's arguments validated first."""
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    plugin = plugin_cls.__new__(plugin_cls)
    plugin._task = FakeTask(args)
    return plugin.run(task_vars=task_vars)
