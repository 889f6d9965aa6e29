# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter of the benchmark's plan: a thin adapter over ``plugins/plugin_utils/bench_plan.py``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

bench_plan = lazy.module('plugin_utils.bench_plan')


def kvpool_benchmark_plan(settings, hostvars, groups):
    """The plan of one run (see ``bench_plan.kvpool_benchmark_plan``)."""
    try:
        return bench_plan.kvpool_benchmark_plan(settings, hostvars, groups)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    """ascend.kvpool benchmark filters."""

    def filters(self):
        return {'kvpool_benchmark_plan': kvpool_benchmark_plan}
