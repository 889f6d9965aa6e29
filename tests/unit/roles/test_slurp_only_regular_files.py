# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles slurp an operator-named path only when it is a regular file (issue 32): slurp blocks on a FIFO and reads
a device to exhaustion. The router's record (kvpool_router run.yml, kvpool_benchmark routing.yml) and the pool
probe's record (mooncake_config probe.yml) are looked at with stat first; a FIFO fails naming the variable and the
host, and is never opened. The tasks run on the controller (connection local) against a FIFO in a temporary
directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'


def tasks_of(role, name):
    return yaml.safe_load((ROOT / 'roles' / role / 'tasks' / name).read_text())


def router_run():
    tasks = tasks_of('kvpool_router', 'run.yml')
    return tasks[:[i for i, t in enumerate(tasks) if 'ascend.kvpool.vllm_router' in t][0]]


def benchmark_routing():
    tasks = tasks_of('kvpool_benchmark', 'routing.yml')
    return tasks[:[i for i, t in enumerate(tasks) if 'ansible.builtin.slurp' in t][0] + 1]


def probe_record():
    block = [t for t in tasks_of('mooncake_config', 'probe.yml') if 'block' in t][0]
    return [t for t in block['always'] if 'ascend.kvpool.mooncake_store_probe' not in t]


def install_detect():
    tasks = tasks_of('mooncake_install', 'detect.yml')
    return [t for t in tasks if 'source tag' in t['name']]


CASES = {
    'mooncake_install_state_dir': (install_detect, {'mooncake_install_method': 'source'}),
    'kvpool_router_record_path': (router_run, {}),
    'kvpool_router_record_path on localhost': (benchmark_routing, {'kvpool_benchmark_router_host': 'localhost'}),
    'mooncake_config_probe_marker': (probe_record, {'mooncake_config_probe_writer_host': 'localhost',
                                                    'mooncake_config__proven': True}),
}


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
@pytest.mark.parametrize('variable', sorted(CASES))
def test_a_fifo_at_a_record_path_is_refused_naming_the_variable_never_read(tmp_path, variable):
    fifo = tmp_path / ('source-version' if variable == 'mooncake_install_state_dir' else 'record')
    os.mkfifo(str(fifo))
    tasks, extra = CASES[variable]
    play = [{'hosts': 'localhost', 'gather_facts': False, 'connection': 'local', 'tasks': tasks(), 'vars': dict(
        extra, ansible_python_interpreter=sys.executable, kvpool_router_record_path=str(fifo),
        kvpool_defaults_router_record_path=str(fifo), mooncake_config_probe_marker=str(fifo),
        mooncake_install_state_dir=str(tmp_path))}]
    playbook = tmp_path / 'play.yml'
    playbook.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'), ANSIBLE_LOCALHOST_WARNING='false',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    run = subprocess.run([str(PLAYBOOK), '-i', 'localhost,', str(playbook)], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), check=False, timeout=120)   # a slurp of the FIFO never ends
    assert run.returncode != 0, run.stdout[-3000:]
    named = '(under %s)' % variable if variable == 'mooncake_install_state_dir' else '(%s)' % variable.split(' ')[0]
    assert_names(run.stdout, '%s %s on localhost' % (fifo, named), 'is not a regular file', 'a FIFO', 'Fix:')
    assert 'TASK [Read the' not in run.stdout                              # no slurp ran
