# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/check_doc_paths.py: the docs name no file that is gone, and the check catches one that is."""

import importlib.util
from pathlib import Path

import pytest

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location('check_doc_paths', str(ROOT / 'tools' / 'check_doc_paths.py'))
checker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checker)

FILES = ('plugins/modules/vllm_server.py', 'roles/vllm_instance/defaults/main.yml',
         'roles/vllm_instance/meta/argument_specs.yml', 'tests/unit/roles/test_playbook_switches.py',
         'tests/sanity/ignore-2.19.txt', 'tools/role_docs.py', 'docs/instances.md', 'docs/services.md',
         'tests/mock/README.md')


@pytest.fixture
def tree(tmp_path):
    """A repository with a few files, a README and docs/*.md to name them."""
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text('x\n')
    (tmp_path / 'README.md').write_text('# x\n')
    return tmp_path


def write(tree, text, name='docs/services.md'):
    (tree / name).write_text(text, encoding='utf-8')


def test_the_repository_names_no_missing_file(capsys):
    assert checker.main([]) == 0
    out = capsys.readouterr().out
    assert ', 0 dangling' in out
    counted = []
    assert checker.problems(ROOT, counted) == []
    assert len(counted) > 100  # the docs do name files, so the check reads them


def test_names_that_exist_pass(tree):
    write(tree, '\n'.join([
        'The module `plugins/modules/vllm_server.py`, its role `roles/<role>/defaults/main.yml` and',
        "the role's `meta/argument_specs.yml`; `tools/role_docs.py --check` regenerates; test",
        '`tests/unit/roles/test_playbook_switches.py::test_x`, line `plugins/modules/vllm_server.py:49`,',
        'the ignore file of a line `tests/sanity/ignore-2.N.txt`; [day 2](instances.md#day-2),',
        '[the mock](../tests/mock/README.md), [a URL](https://example.org/x), [here](#top).',
        'Not ours: `mooncake.json`, `kvpool-vllm-<name>.service`, `/etc/hccn.conf`, `reports/npu_network.json`,',
        '`tests/output/junit.xml` (ansible-test writes it), `vllm-project/vllm-ascend:docs/source/kv_pool.md`,',
        '`tests/unit/...py` (elided).',
        '```sh',
        'python tools/gone.py   # `tools/gone.py` in a fenced block is a command, not read',
        '```',
    ]))
    assert checker.problems(tree) == []


def test_a_missing_file_in_backquotes_fails_naming_doc_line_and_name(tree, capsys):
    write(tree, 'Intro.\n\nunit tests of the judgement in `tests/unit/plugins/plugin_utils/test_preflight.py`.\n',
          name='docs/preflight.md')
    assert checker.main([], root=tree) == 1
    assert_names(capsys.readouterr().out, 'docs/preflight.md:3',
                 'tests/unit/plugins/plugin_utils/test_preflight.py', 'does not exist', 'fix the name', '1 dangling')


def test_a_name_wrapped_over_two_lines_is_read_whole(tree):
    write(tree, 'Intro.\n\nregenerate with `tools/gone.py\n--check` then\n')
    found = checker.problems(tree)
    assert len(found) == 1
    assert_names(found[0], 'docs/services.md:3', 'tools/gone.py')


@pytest.mark.parametrize('doc, text, name', [
    ('docs/services.md', '[gone](gone.md)', 'docs/gone.md'),
    ('docs/services.md', '[gone](../tools/gone.py#L3)', 'tools/gone.py'),
    ('README.md', '[gone](docs/gone.md#anchor)', 'docs/gone.md'),
    ('README.md', 'a role `roles/<role>/tasks/gone.yml`', 'roles/<role>/tasks/gone.yml'),
    ('README.md', 'the directory `molecule/`', 'molecule/'),
])
def test_a_missing_link_or_pattern_fails(tree, doc, text, name):
    write(tree, text + '\n', name=doc)
    found = checker.problems(tree)
    assert len(found) == 1
    assert_names(found[0], doc + ':1', name, 'does not exist')
