# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/role_docs.py: the role READMEs are the argument specs, and the check fails when they are not."""

import importlib.util
import shutil
from pathlib import Path

import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location('role_docs', str(ROOT / 'tools' / 'role_docs.py'))
role_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(role_docs)


def test_readmes_are_up_to_date(capsys):
    assert role_docs.main(['--check']) == 0
    assert 'up to date' in capsys.readouterr().out


def test_readme_shows_every_variable_and_entry_point():
    specs = yaml.safe_load((ROOT / 'roles/vllm_instance/meta/argument_specs.yml').read_text())['argument_specs']
    readme = (ROOT / 'roles/vllm_instance/README.md').read_text()
    for name in specs['main']['options']:
        assert '| `%s` |' % name in readme
    for entry in specs:
        assert '## Entry point `%s`' % entry in readme
    assert '`tasks_from: wait.yml`' in readme


def test_check_fails_naming_a_stale_readme(tmp_path, capsys):
    shutil.copytree(str(ROOT / 'roles'), str(tmp_path / 'roles'))
    path = tmp_path / 'roles/mooncake_master/meta/argument_specs.yml'
    path.write_text(path.read_text().replace('RPC port (--port, or --rpc_port from Mooncake 0.3.12).',
                                             'RPC port of the master (--port).'))
    assert role_docs.main(['--check'], root=tmp_path) == 1
    assert_names(capsys.readouterr().out, 'roles/mooncake_master/README.md', 'stale or missing', 'make role-docs')
    assert role_docs.main([], root=tmp_path) == 0
    assert 'RPC port of the master (--port).' in (tmp_path / 'roles/mooncake_master/README.md').read_text()
    assert role_docs.main(['--check'], root=tmp_path) == 0
