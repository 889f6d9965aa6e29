# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The built artifact holds what a user runs (plugins, roles, playbooks, docs, meta, tests/sanity, the licence, the
changelog, README, the example inventory) and nothing of the workshop (molecule, tools, scripts, the mock
equipment, the unit tests, the Makefile, ...): galaxy.yml `build_ignore`. Built from this checkout with the venv's
`ansible-galaxy collection build` (about a second), then listed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GALAXY = Path(sys.executable).parent / 'ansible-galaxy'

# Every entry the artifact may hold: a top-level name, or a pattern of a path under it. Anything else fails.
TOP = {
    'MANIFEST.json', 'FILES.json', 'README.md', 'COPYING', 'CHANGELOG.md', 'CHANGELOG.rst',
    'ee-requirements.txt', 'ee-bindep.txt',  # links to meta/ee-*.txt (meta/execution-environment.yml)
    'changelogs', 'docs', 'inventories', 'meta', 'playbooks', 'plugins', 'roles', 'tests',
}
UNDER = {
    'changelogs': ['changelogs/changelog.yaml', 'changelogs/config.yaml'],
    'docs': ['docs/*.md'],
    'inventories': ['inventories/2node', 'inventories/2node/*'],
    'meta': ['meta/runtime.yml', 'meta/execution-environment.yml', 'meta/ee-requirements.txt', 'meta/ee-bindep.txt'],
    # tests/config.yml: the modules' Python floor, which ansible-test reads with the ignore files
    'tests': ['tests/config.yml', 'tests/sanity', 'tests/sanity/ignore-2.*.txt'],
}
# What never ships, wherever it is.
NEVER = ['*/__pycache__', '*/__pycache__/*', '*.pyc', '*/.pytest_cache*', '*.tar.gz']


@pytest.fixture(scope='module')
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp('dist')
    run = subprocess.run([str(GALAXY), 'collection', 'build', '--output-path', str(out), str(ROOT)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    (path,) = out.glob('ascend-kvpool-*.tar.gz')
    with tarfile.open(str(path)) as tar:
        members = dict((m.name.rstrip('/'), m) for m in tar.getmembers() if m.name not in ('.', './'))
        manifest = json.load(tar.extractfile('MANIFEST.json'))
    return members, manifest


pytestmark = pytest.mark.skipif(not GALAXY.exists(), reason='ansible-galaxy not next to this Python')


def test_nothing_outside_the_allow_list(artifact):
    members = artifact[0]
    unexpected = []
    for name in sorted(members):
        top = name.split('/', 1)[0]
        if top not in TOP or any(fnmatch.fnmatch(name, p) for p in NEVER):
            unexpected.append(name)
        elif top in UNDER and name != top and not any(fnmatch.fnmatch(name, p) for p in UNDER[top]):
            unexpected.append(name)
    assert not unexpected, 'not for the artifact (galaxy.yml build_ignore): %s' % unexpected


def test_the_workshop_stays_home(artifact):
    members = artifact[0]
    for gone in ('molecule', 'tools', 'scripts', 'Makefile', 'ansible.cfg', 'requirements.txt', 'tests/unit',
                 'tests/mock', 'tests/conformance', 'tests/mooncake_matrix', 'tests/reuse', 'tests/install',
                 'inventories/sim', 'changelogs/fragments', 'docs/images', 'site.yml', '.config'):
        assert not any(n == gone or n.startswith(gone + '/') for n in members), gone


def test_what_a_user_runs_is_there(artifact):
    members, manifest = artifact
    names = set(members)
    wanted = {'README.md', 'COPYING', 'meta/runtime.yml', 'meta/execution-environment.yml',
              'changelogs/changelog.yaml', 'changelogs/config.yaml', 'inventories/2node/hosts.yml'}
    # every playbook, role file, plugin and doc of the checkout (generated caches aside)
    for pattern in ('playbooks/**/*', 'roles/**/*', 'plugins/**/*', 'docs/*.md', 'tests/sanity/ignore-2.*.txt'):
        for path in ROOT.glob(pattern):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and '__pycache__' not in rel and not rel.endswith('.pyc'):
                wanted.add(rel)
    assert wanted - names == set()
    assert 'playbooks/site.yml' in names and 'plugins/modules/vllm_server.py' in names
    roles = sorted(p.parent.name for p in (ROOT / 'roles').glob('*/tasks'))
    assert roles and all('roles/%s/tasks/main.yml' % r in names for r in roles)
    assert all('roles/%s/meta/argument_specs.yml' % r in names for r in roles)
    assert manifest['collection_info']['name'] == 'kvpool'
    assert manifest['collection_info']['license'] == ['GPL-3.0-or-later']


def test_the_execution_environment_lists_are_one_pair_of_files(artifact):
    members = artifact[0]
    for name in ('ee-requirements.txt', 'ee-bindep.txt'):
        member = members[name]
        assert member.issym() and member.linkname == 'meta/' + name, (name, member.linkname)
        assert (ROOT / name).is_symlink() and (ROOT / name).resolve() == (ROOT / 'meta' / name).resolve()
