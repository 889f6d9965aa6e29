# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ownership of the node's vllm-ascend container (issue 32): role vllm_ascend_container labels the container it makes
(``ascend.kvpool.managed=vllm_ascend_container``) and recreates or removes a container of its name only when it
carries that label (or ``vllm_ascend_container_adopt`` says the role made it, before the label). The guide's
hand-made ``vllm-ascend``, another tool's container and a service container of the collection fail the role naming
the host, the container and the fix, in check mode too; a read that fails is never "no container".

docker cannot run here: the answers of community.docker.docker_container_info are SIMULATED, in its result's shape
(``exists``, ``container``: docker inspect's document, Docker 24). The decision is filter
``ascend.kvpool.node_container_problem`` (``module_utils/_service.py``); the role's assert runs for real through
ansible-playbook on localhost with that answer given (the read itself skipped)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.filter.kvpool import FilterModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _service
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / 'roles' / 'vllm_ascend_container'
TASKS = yaml.safe_load((ROLE / 'tasks' / 'container.yml').read_text())
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
NAME = 'vllm-ascend'
OURS = {_service.MANAGED_LABEL: _service.NODE_CONTAINER_MANAGED}
problem = FilterModule().filters()['node_container_problem']


def info(labels=None, exists=True, **result):
    """A registered community.docker.docker_container_info result of container NAME with ``labels``."""
    out = {'changed': False, 'exists': exists}
    if exists:
        out['container'] = {'Id': '4f1e' * 16, 'Name': '/' + NAME, 'State': {'Status': 'running', 'Running': True},
                            'Config': {'Image': 'quay.io/ascend/vllm-ascend:v0.22.1rc1', 'Cmd': ['bash'],
                                       'Labels': labels}}
    out.update(result)
    return out


# The guide's `docker run --name vllm-ascend ... -it $IMAGE bash`: no labels, or only the image's.
GUIDES = [None, {}, {'org.opencontainers.image.version': '22.04'}]


def test_no_container_or_the_roles_own_may_be_made_recreated_or_removed():
    for state in ('started', 'absent'):
        assert problem(info(exists=False), NAME, host='node1', state=state) == ''
        assert problem(info(dict(OURS, **{'org.opencontainers.image.version': '22.04'})), NAME, host='node1',
                       state=state) == ''


@pytest.mark.parametrize('labels', GUIDES)
@pytest.mark.parametrize('state, verb', [('started', 'not recreated or removed'), ('absent', 'not removed')])
def test_a_container_the_role_did_not_make_is_neither_recreated_nor_removed(labels, state, verb):
    msg = problem(info(labels), NAME, host='node1', state=state)
    assert_names(msg, 'node1: container vllm-ascend', 'not made by role ascend.kvpool.vllm_ascend_container',
                 'no label ascend.kvpool.managed=vllm_ascend_container', verb, 'nothing was changed',
                 'Fix', 'docker rename vllm-ascend', 'docker rm -f vllm-ascend', 'vllm_ascend_container_name',
                 'vllm_ascend_container_adopt=true')


def test_a_label_of_another_value_is_named_and_adopt_takes_an_unlabelled_container():
    msg = problem(info({_service.MANAGED_LABEL: 'someone-else'}), NAME, host='node1')
    assert_names(msg, 'it has ascend.kvpool.managed=someone-else', 'not made by role')
    for labels in GUIDES:
        assert problem(info(labels), NAME, host='node1', adopt=True) == ''


@pytest.mark.parametrize('labels', [{_service.MANAGED_LABEL: '1'}, {_service.SPEC_LABEL: '{}'}])
def test_a_service_container_is_never_taken_for_the_node_container_adopt_or_not(labels):
    for adopt in (False, True):
        msg = problem(info(labels), 'kvpool-mooncake-master', host='node1', adopt=adopt)
        assert_names(msg, 'node1: container kvpool-mooncake-master is a service container of ascend.kvpool',
                     'label ascend.kvpool.managed=1', 'nothing was changed', 'Fix',
                     'vllm_ascend_container_name to another name')


@pytest.mark.parametrize('result', [
    {'failed': True, 'msg': 'Error connecting: Error while fetching server API version: Connection refused'},
    {'skipped': True, 'skip_reason': 'Conditional result was False'},
    {'changed': False},
    None,
])
def test_a_read_that_failed_is_never_no_container(result):
    msg = problem(result, NAME, host='node1')
    assert_names(msg, 'node1: the read of container vllm-ascend', 'gave no answer', 'unknown', 'nothing was changed',
                 'Fix', 'docker daemon runs on node1')


LABEL_VALUE = st.sampled_from(['1', _service.NODE_CONTAINER_MANAGED, '', 'x']) | st.text(max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.none() | st.dictionaries(st.sampled_from([_service.MANAGED_LABEL, _service.SPEC_LABEL, 'other']),
                                   LABEL_VALUE), st.booleans())
def test_whatever_labels_the_container_has_the_role_goes_ahead_only_on_its_own(labels, adopt):
    msg = problem(info(labels), NAME, host='node1', adopt=adopt)
    labels = labels or {}
    ours = labels.get(_service.MANAGED_LABEL) == _service.NODE_CONTAINER_MANAGED
    service = not ours and (labels.get(_service.MANAGED_LABEL) == '1' or _service.SPEC_LABEL in labels)
    assert (msg == '') == (ours or (adopt and not service)), (labels, adopt, msg)
    assert msg == '' or ('node1: ' in msg and 'Fix' in msg)


# --- the role's tasks ------------------------------------------------------------------------------------------------

def task(start):
    return [t for t in TASKS if t['name'].startswith(start)][0]


def test_the_role_labels_its_container_and_checks_ownership_before_any_change():
    names = [t['name'] for t in TASKS]
    read, refuse = task('Read the container of that name'), task('Refuse a container of that name')
    run, remove = task('Run the vllm-ascend container'), task('Remove the container')
    assert names.index(read['name']) < names.index(refuse['name']) == 1 and names.index(run['name']) > 1
    assert names.index(remove['name']) > 1 and 'when' not in read and 'when' not in refuse  # both states, always
    assert read['community.docker.docker_container_info']['name'] == '{{ vllm_ascend_container_name }}'
    assert read['check_mode'] is False and read['register'] == 'vllm_ascend_container__existing'
    expr = refuse['vars']['vllm_ascend_container__problem']
    assert 'vllm_ascend_container__existing | ascend.kvpool.node_container_problem(' in expr
    for part in ('host=inventory_hostname', 'adopt=vllm_ascend_container_adopt | bool',
                 'state=vllm_ascend_container_state'):
        assert part in expr
    assert run['community.docker.docker_container']['labels'] == OURS
    defaults = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
    assert defaults['vllm_ascend_container_adopt'] is False


def run_refusal(tmp_path, existing, check=False, **extra):
    """The role's ownership assert, run by ansible-playbook on localhost with the read's answer given."""
    refuse = task('Refuse a container of that name')
    play = [{'hosts': 'localhost', 'gather_facts': False, 'connection': 'local', 'tasks': [refuse], 'vars': dict({
        'ansible_python_interpreter': sys.executable, 'vllm_ascend_container_name': NAME,
        'vllm_ascend_container_adopt': False, 'vllm_ascend_container_state': 'started',
        'vllm_ascend_container__existing': existing}, **extra)}]
    playbook = tmp_path / 'refuse.yml'
    playbook.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'), ANSIBLE_LOCALHOST_WARNING='false',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false', ANSIBLE_NOCOLOR='1')
    argv = [str(PLAYBOOK), '-i', 'localhost,', str(playbook)] + (['--check'] if check else [])
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_the_roles_assert_refuses_the_guides_container_in_check_mode_too_and_passes_its_own(tmp_path):
    for check in (False, True):
        done = run_refusal(tmp_path, info(None), check=check)
        assert done.returncode != 0, done.stdout[-2000:]
        assert_names(done.stdout, 'localhost: container vllm-ascend', 'not made by role', 'nothing was changed',
                     'vllm_ascend_container_adopt=true')
    done = run_refusal(tmp_path, info(dict(OURS)), vllm_ascend_container_state='absent')
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
