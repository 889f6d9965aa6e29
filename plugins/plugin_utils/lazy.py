# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Deferred imports for the collection's filter plugins.

Why: to find one filter of a collection, Ansible's Jinja2 plugin loader imports *every* filter file of that
collection, in every worker process (a fork per host and task), and the collection loader compiles their sources
each time (no bytecode cache). With the filter files importing their logic at the top, every task that used any
``ascend.kvpool`` filter paid for compiling all of it (preflight, vLLM plan, etcd, router, ...): 30-40 ms of
controller CPU per worker, measured on the network check (tools/bench_verify_network.py, docs/speed.md). The filter
files therefore reach their logic through :func:`module` and :func:`function`, which import it on first use.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

_PACKAGE = 'ansible_collections.ascend.kvpool.plugins.'


class _Module(object):
    """Stand-in for a module of this collection: imports it at the first attribute read."""

    def __init__(self, name):
        self._lazy_name = _PACKAGE + name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._lazy_name), attr)


def module(name):
    """``plugins.<name>`` of this collection (e.g. ``'plugin_utils.preflight'``), imported on first use."""
    return _Module(name)


def function(name, attr):
    """A function calling ``plugins.<name>.<attr>`` of this collection, imported at the first call (for a filter
    map, which Ansible reads from every filter file when it looks up any filter)."""
    target = module(name)

    def call(*args, **kwargs):
        return getattr(target, attr)(*args, **kwargs)

    call.__name__ = attr
    call.__doc__ = 'plugins.%s.%s, imported at the first call.' % (name, attr)
    return call
