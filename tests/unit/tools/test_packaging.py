# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection says the same thing everywhere: one licence, the tested ansible-core lines, what the EE needs."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
GALAXY = yaml.safe_load((ROOT / 'galaxy.yml').read_text())


def test_one_licence_everywhere():
    assert GALAXY['license'] == ['GPL-3.0-or-later']
    assert 'GNU GENERAL PUBLIC LICENSE' in (ROOT / 'COPYING').read_text().splitlines()[0]
    for meta in sorted(ROOT.glob('roles/*/meta/main.yml')):
        assert yaml.safe_load(meta.read_text())['galaxy_info']['license'] == 'GPL-3.0-or-later', meta
    headers = set()
    for path in sorted(ROOT.glob('plugins/**/*.py')) + sorted(ROOT.glob('tests/unit/**/*.py')):
        headers.update(re.findall(r'^# SPDX-License-Identifier: ([A-Za-z0-9.+-]+)$', path.read_text(), re.M))
    assert headers == {'GPL-3.0-or-later'}
    assert not re.search(r'Apache', (ROOT / 'galaxy.yml').read_text())


def test_requires_ansible_is_the_tested_lines():
    runtime = yaml.safe_load((ROOT / 'meta' / 'runtime.yml').read_text())
    assert runtime['requires_ansible'] == '>=2.16.0'  # a floor: every line from it up is tested
    ignores = sorted(p.name for p in (ROOT / 'tests' / 'sanity').glob('ignore-2.*.txt'))
    assert ignores == ['ignore-2.%d.txt' % minor for minor in range(16, 22)]
    makefile = (ROOT / 'Makefile').read_text()
    assert re.search(r'^OLDER_LINES := 2\.16 2\.17 2\.18$', makefile, re.M)
    assert re.search(r'^NEWER_LINES := 2\.20 2\.21$', makefile, re.M)
    for line in ('2.16', '2.17', '2.18', '2.20', '2.21'):
        reqs = (ROOT / 'tests' / 'sanity' / ('requirements-%s.txt' % line)).read_text()
        assert re.search(r'^ansible-core==%s\.\d+$' % re.escape(line), reqs, re.M), line
    assert re.search(r'^ansible-core==2\.19\.\d+$', (ROOT / 'requirements-sanity.txt').read_text(), re.M)
    ee = yaml.safe_load((ROOT / 'meta' / 'execution-environment.yml').read_text())
    assert ee['dependencies']['ansible_core']['package_pip'] == 'ansible-core>=2.16'


def test_no_meta_end_role_before_2_18():
    for path in sorted(ROOT.glob('roles/**/*.yml')) + sorted(ROOT.glob('playbooks/**/*.yml')):
        assert not re.search(r'^\s*(ansible\.builtin\.)?meta:\s*end_role\b', path.read_text(), re.M), path


def test_dependencies_cover_the_collections_used():
    used = set()
    for path in list(ROOT.glob('roles/**/*.yml')) + list(ROOT.glob('playbooks/**/*.yml')) + list(ROOT.glob('*.yml')):
        for fqcn in re.findall(r'^\s*-?\s*([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+:', path.read_text(), re.M):
            used.add(fqcn)
    used -= {'ansible.builtin', 'ascend.kvpool'}
    assert used == {'community.docker'}
    assert set(GALAXY['dependencies']) == used


def test_execution_environment_ships():
    ee = yaml.safe_load((ROOT / 'meta' / 'execution-environment.yml').read_text())
    assert ee['version'] == 3
    for key in ('python', 'system'):
        name = ee['dependencies'][key]
        # `ansible-builder create -f meta/execution-environment.yml` reads it beside the file, introspection of the
        # installed collection at its root: one file, linked from the root (ansible-builder issue 414)
        assert (ROOT / 'meta' / name).is_file() and not (ROOT / 'meta' / name).is_symlink(), name
        assert (ROOT / name).is_symlink() and (ROOT / name).resolve() == (ROOT / 'meta' / name).resolve(), name
    for ignored in GALAXY['build_ignore']:
        assert not ignored.startswith('meta'), ignored


def test_a_clone_installs_what_galaxy_yml_depends_on():
    """requirements.yml (`ansible-galaxy collection install -r requirements.yml` in a plain clone) asks for the
    collections and ranges of galaxy.yml's dependencies."""
    wanted = yaml.safe_load((ROOT / 'requirements.yml').read_text())['collections']
    assert {c['name']: c['version'] for c in wanted} == GALAXY['dependencies']


def test_release_metadata_is_real():
    """No placeholder address in galaxy.yml, and every plugin's version_added is a release of changelog.yaml."""
    for key in ('repository', 'homepage', 'issues', 'documentation'):
        assert 'example.' not in str(GALAXY.get(key) or ''), key
    releases = set(yaml.safe_load((ROOT / 'changelogs' / 'changelog.yaml').read_text())['releases'])
    added = {}
    for path in sorted(ROOT.glob('plugins/modules/*.py')) + sorted(ROOT.glob('plugins/filter/*.yml')):
        for version in re.findall(r'^\s*version_added:\s*["\']?([0-9.]+)', path.read_text(), re.M):
            added[path.relative_to(ROOT).as_posix()] = version
    assert len(added) >= 40
    assert {p: v for p, v in added.items() if v not in releases and v != GALAXY['version']} == {}


def test_the_readme_lists_every_module():
    """The README's table of modules and plugins names each module (and each action, by its module's name)."""
    text = (ROOT / 'README.md').read_text()
    table = '\n'.join(line for line in text.splitlines() if line.startswith('| module') or line.startswith('| action'))
    missing = [p.stem for p in sorted(ROOT.glob('plugins/modules/*.py')) if '`%s`' % p.stem not in table]
    assert missing == []
