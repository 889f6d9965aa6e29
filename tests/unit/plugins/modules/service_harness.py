# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm_server and mooncake_master run as modules over an in-memory service manager (``Manager``, fixture
``manager``): shared by the tests of the service modules, their bad input and the router's modules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _service
from ansible_collections.ascend.kvpool.plugins.modules import mooncake_master, vllm_server
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.service_fakes import FakeManager
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port


class Manager(FakeManager):
    """The in-memory service manager of service_fakes.py: a healthy start (unless ``on_start`` says otherwise), and
    the status lines of a running or missing unit."""

    def __init__(self):
        super(Manager, self).__init__()
        self.on_start = None

    def status(self, spec):
        lines = ['LoadState=%s' % ('loaded' if self.text else 'not-found'),
                 'ActiveState=%s' % ('active' if self.running else 'inactive'),
                 'SubState=%s' % ('running' if self.running else 'dead'),
                 'MainPID=%d' % (4242 if self.running else 0), 'NRestarts=0', 'Result=success',
                 'UnitFileState=%s' % ('enabled' if self.text else ''), 'ExecMainStartTimestampMonotonic=0',
                 'ExecMainStatus=0']
        return _service.status_from_show(_service.parse_show('\n'.join(lines) + '\n'))

    def apply(self, spec, text, secret, old_text, old_secret, restart):
        super(Manager, self).apply(spec, text, secret, old_text, old_secret, restart)
        if self.on_start:
            self.on_start()

    def logs(self, spec, lines):
        return ''

    def list_units(self, prefix):
        return []  # no other unit of the collection on this host


def manager_behind(monkeypatch, tmp_path, modules, binary_name):
    """An in-memory Manager behind ``modules`` (their ``backend_for``), with an executable stand-in binary
    ``binary_name`` in ``tmp_path`` (``mgr.tmp``)."""
    mgr = Manager()
    for mod in modules:
        monkeypatch.setattr(mod, 'backend_for', lambda module, container=None: mgr)
    binary = tmp_path / binary_name
    binary.write_text('#!/bin/sh\n')
    binary.chmod(0o755)
    mgr.tmp = tmp_path
    return mgr


@pytest.fixture
def manager(monkeypatch, tmp_path):
    return manager_behind(monkeypatch, tmp_path, (vllm_server, mooncake_master), 'mooncake_master')


def run(module, capsys, check=False, diff=False, **params):
    if check:
        params['_ansible_check_mode'] = True
    if diff:
        params['_ansible_diff'] = True
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def vllm(capsys, **args):
    args.setdefault('port', free_port())
    params = dict(name='qwen-a', model='/models/qwen', served_model_name='qwen', host='127.0.0.1',
                  binary=sys.executable, ready_timeout=5,
                  poll_interval=0.02, stop_timeout=5)
    params.update(args)
    return run(vllm_server, capsys, **params)


def master(manager, capsys, **args):
    params = dict(binary=str(manager.tmp / 'mooncake_master'), port=free_port(), metrics_port=free_port(),
                  ready_timeout=1, poll_interval=0.02, stop_timeout=5)
    params.update(args)
    return run(mooncake_master, capsys, **params)
