# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/plan.yml (imported by benchmark.yml and monitoring.yml) plans the hosts of every group those playbooks
read instances from: the node group, kvpool_benchmark_group and kvpool_monitoring_node_group
(ansible-playbook --list-hosts: nothing runs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
INVENTORY = {'all': {'children': {
    'npu_nodes': {'hosts': {'node1': None, 'node2': None}},
    'bench': {'hosts': {'node2': None, 'node3': None}},
    'scraped': {'hosts': {'node4': None}},
    'other': {'hosts': {'node5': None}},
}}}


def planned_hosts(tmp_path, *extra):
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text(yaml.safe_dump(INVENTORY))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'))
    args = [str(PLAYBOOK), '-i', str(inventory), str(ROOT / 'playbooks' / 'plan.yml'), '--list-hosts']
    for e in extra:
        args += ['-e', e]
    run = subprocess.run(args, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    text = run.stdout.split('hosts (', 1)[1]
    return sorted(line.strip() for line in text.splitlines()[1:] if line.strip())


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_the_plan_covers_the_node_benchmark_and_monitoring_groups(tmp_path):
    assert planned_hosts(tmp_path) == ['node1', 'node2']
    assert planned_hosts(tmp_path, 'kvpool_benchmark_group=bench', 'kvpool_monitoring_node_group=scraped') == [
        'node1', 'node2', 'node3', 'node4']
