# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/check_argument_specs.py: in sync on this repository, and failing on what it must catch."""

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location('check_argument_specs', str(ROOT / 'tools' / 'check_argument_specs.py'))
checker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checker)


@pytest.fixture
def tree(tmp_path):
    """A copy of the roles and the playbooks that call them."""
    for name in ('roles', 'playbooks'):
        shutil.copytree(str(ROOT / name), str(tmp_path / name))
    for path in ROOT.glob('*.yml'):
        shutil.copy(str(path), str(tmp_path / path.name))
    return tmp_path


def test_repository_is_in_sync(capsys):
    assert checker.main() == 0
    out = capsys.readouterr().out
    assert ', 0 problem(s)' in out
    assert 'tasks_from call(s)' in out


def test_every_entry_point_that_site_yml_calls_is_found(tree):
    problems, calls = checker.check_entry_points(tree)
    assert problems == []
    assert calls >= 5


def drop_entry(tree, role, entry):
    path = tree / 'roles' / role / 'meta' / 'argument_specs.yml'
    specs = yaml.safe_load(path.read_text())
    del specs['argument_specs'][entry]
    path.write_text(yaml.safe_dump(specs))


@pytest.mark.parametrize('role, entry', [('vllm_instance', 'wait'), ('mooncake_config', 'probe'),
                                         ('vllm_ascend_container', 'preflight')])
def test_fails_on_an_entry_point_without_argument_spec(tree, capsys, role, entry):
    drop_entry(tree, role, entry)
    assert checker.main(tree) == 1
    out = capsys.readouterr().out
    assert_names(out, 'playbooks/site.yml', 'tasks_from %s.yml of role %s' % (entry, role), 'no argument spec',
                 'add the entry point %s' % entry, 'roles/%s/meta/argument_specs.yml' % role)


def test_fails_when_an_entry_point_redescribes_an_option(tree, capsys):
    path = tree / 'roles' / 'mooncake_config' / 'meta' / 'argument_specs.yml'
    text = path.read_text()
    marker = '  probe:\n'
    head, tail = text.split(marker)
    edited = tail.replace('description: Size of the probe object in bytes', 'description: Another description', 1)
    assert edited != tail  # the edit took place (else the check below would test nothing)
    path.write_text(head + marker + edited)
    assert checker.main(tree) == 1
    assert_names(capsys.readouterr().out, 'mooncake_config: probe:', 'mooncake_config_probe_size_bytes', 'differs',
                 'definition in main')


def test_fails_on_a_templated_default_of_an_int_option(tree, capsys):
    """antsibull-docs cannot read "{{ ... }}" as an int: the spec leaves such a default out."""
    path = tree / 'roles' / 'mooncake_master' / 'meta' / 'argument_specs.yml'
    text = path.read_text()
    edited = text.replace('      mooncake_master_port:\n        type: int\n',
                          '      mooncake_master_port:\n        type: int\n'
                          '        default: "{{ kvpool_defaults_master_port }}"\n', 1)
    assert edited != text
    path.write_text(edited)
    assert checker.main(tree) == 1
    assert_names(capsys.readouterr().out, 'mooncake_master: main:', 'mooncake_master_port', 'type int',
                 'templated default', 'leave the default out of the spec')
