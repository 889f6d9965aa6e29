# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A recorded Ascend node for the network modules' tests: ``Node`` answers ``hccn_tool`` and ``npu-smi`` from the
fixtures of ``module_utils/fixtures``, and ``run_module`` runs a module against it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _runner
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import read_answer

TOOL = '/usr/local/Ascend/driver/tools/hccn_tool'
SMI = '/usr/local/bin/npu-smi'
HEALTHY = {
    'lldp': 'hccn_lldp_full.txt', 'link': 'hccn_link_up.txt', 'net_health': 'hccn_net_health_success.txt',
    'netdetect': 'hccn_netdetect_addr.txt', 'gateway': 'hccn_gateway_ok.txt', 'ip': 'hccn_ip_ok.txt',
    'tls': 'hccn_tls_ok.txt', 'optical': 'hccn_optical_present_reconstructed.txt',
    'link_stat': 'hccn_link_stat_910a.txt',
}


# ``npu-smi info -l`` of a node with one NPU, for the recorded tables that show one NPU (a list of 8 beside them
# would be a table cut short, which the modules report).
ONE_NPU_LIST = 'npu_smi_list_one_npu.txt'


class Node(object):
    """Answers run_command from recorded fixtures; records every call (thread-safe)."""

    def __init__(self, overrides=None, smi_list='npu_smi_list_compact.txt', smi_info='npu_smi_info_910b2_running.txt',
                 smi_topo='npu_smi_topo_910b3.txt'):
        self.overrides = overrides or {}
        self.smi_list = smi_list
        self.smi_info = smi_info
        self.smi_topo = smi_topo
        self.calls = []
        self.lock = threading.Lock()

    def answer(self, argv):
        if argv[0] == SMI:
            if argv[1:] == ['info', '-t', 'topo']:
                return self.smi_topo if isinstance(self.smi_topo, dict) else read_answer(self.smi_topo)
            answer = self.smi_list if argv[1:] == ['info', '-l'] else self.smi_info
            return answer if isinstance(answer, dict) else read_answer(answer)
        dev = int(argv[2])
        check = argv[3].lstrip('-')
        if check == 'ping':
            return read_answer(self.overrides.get((dev, 'ping', argv[6]), 'hccn_ping_ok.txt'))
        name = self.overrides.get((dev, check), HEALTHY[check])
        if isinstance(name, list):  # a sequence of answers: busy, busy, ok
            with self.lock:
                name = name.pop(0) if len(name) > 1 else name[0]
        return read_answer(name)

    def execute(self, argv, timeout=None):
        with self.lock:
            self.calls.append(list(argv))
        a = self.answer(list(argv))
        return a['rc'], a['stdout'], a['stderr']


def run_module(mod, args, node, monkeypatch, capsys, bins=None):
    bins = {'hccn_tool': TOOL, 'npu-smi': SMI} if bins is None else bins
    monkeypatch.setattr(_runner, 'execute', node.execute)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: bins.get(name))
    if hasattr(mod, 'os'):
        monkeypatch.setattr(mod.os, 'access', lambda path, mode: path in bins.values())
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            mod.main()
    return json.loads(capsys.readouterr().out)
