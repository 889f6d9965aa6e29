# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/check_map.py: the map of docs/DEVELOPING.md names every Python file under plugins/, and nothing else."""

import importlib.util
import shutil
from pathlib import Path
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location('check_map', str(ROOT / 'tools' / 'check_map.py'))
check_map = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_map)


def copy(tmp_path):
    shutil.copytree(str(ROOT / 'plugins'), str(tmp_path / 'plugins'),
                    ignore=shutil.ignore_patterns('__pycache__', '*.yml'))
    (tmp_path / 'docs').mkdir()
    shutil.copy(str(ROOT / 'docs' / 'DEVELOPING.md'), str(tmp_path / 'docs' / 'DEVELOPING.md'))
    return tmp_path / 'docs' / 'DEVELOPING.md'


def test_the_map_lists_every_plugin_file(capsys):
    assert check_map.main([]) == 0
    out = capsys.readouterr().out
    assert_names(out, 'docs/DEVELOPING.md', 'Python file under plugins/')
    assert '(%d)' % len(check_map.plugin_files(ROOT)) in out


def test_one_row_per_file_under_plugins():
    rows = check_map.map_rows((ROOT / 'docs' / 'DEVELOPING.md').read_text(encoding='utf-8'))
    named = [check_map.PATH.findall(first)[0] for dummy, first, dummy in rows if first != 'file']
    assert named == sorted(set(named), key=named.index)
    assert sorted(named) == check_map.plugin_files(ROOT)
    for path in ('plugins/modules/etcd_member.py', 'plugins/modules/vllm_router_check.py',
                 'plugins/module_utils/_validate.py', 'plugins/module_utils/_errors.py',
                 'plugins/plugin_utils/lazy.py', 'plugins/plugin_utils/bench_report.py'):
        assert path in named


def test_a_new_file_missing_from_the_map_fails_naming_it_and_the_fix(tmp_path, capsys):
    copy(tmp_path)
    (tmp_path / 'plugins/module_utils/_new_thing.py').write_text('"""New."""\n')
    assert check_map.main([], root=tmp_path) == 1
    out = capsys.readouterr().out
    assert_names(out, 'plugins/module_utils/_new_thing.py', 'missing', 'docs/DEVELOPING.md')
    assert_names(out, 'add a row', '| `plugins/module_utils/_new_thing.py` | what it owns |')
    assert len(out.splitlines()) == 1


def test_a_row_of_a_removed_file_fails_naming_it_and_the_fix(tmp_path, capsys):
    copy(tmp_path)
    (tmp_path / 'plugins/plugin_utils/lazy.py').unlink()
    assert check_map.main([], root=tmp_path) == 1
    out = capsys.readouterr().out
    assert out.startswith('check_map:')
    assert_names(out, 'docs/DEVELOPING.md', 'plugins/plugin_utils/lazy.py', 'does not exist', 'remove its row')


def test_grouped_duplicate_and_empty_rows_fail(tmp_path, capsys):
    doc = copy(tmp_path)
    text = doc.read_text(encoding='utf-8')
    vllm_row = next(line for line in text.splitlines() if line.startswith('| `plugins/module_utils/_vllm.py`'))
    text = text.replace(vllm_row, '| `plugins/module_utils/_vllm.py`, `_mooncake.py` | grouped |')
    lazy_row = next(line for line in text.splitlines() if line.startswith('| `plugins/plugin_utils/lazy.py`'))
    text = text.replace(lazy_row, lazy_row + '\n' + lazy_row)
    sizes_row = next(line for line in text.splitlines() if line.startswith('| `plugins/plugin_utils/sizes.py`'))
    text = text.replace(sizes_row, '| `plugins/plugin_utils/sizes.py` |  |')
    doc.write_text(text, encoding='utf-8')
    assert check_map.main([], root=tmp_path) == 1
    out = capsys.readouterr().out
    assert 'must name exactly one file' in out and '_mooncake.py' in out
    assert_names(out, 'plugins/plugin_utils/lazy.py', 'has a row already', 'merge')
    assert_names(out, 'plugins/plugin_utils/sizes.py', 'say what it owns')
    assert_names(out, 'plugins/module_utils/_vllm.py', 'missing from the map')


def test_a_doc_without_the_section_fails(tmp_path, capsys):
    doc = copy(tmp_path)
    doc.write_text(doc.read_text(encoding='utf-8').replace(check_map.SECTION, '### Files'), encoding='utf-8')
    assert check_map.main([], root=tmp_path) == 1
    assert_names(capsys.readouterr().out, 'no section', '### What each Python file owns', 'add it')
