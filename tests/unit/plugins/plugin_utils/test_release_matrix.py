# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Today's release matrix (docs/releases.md): one default release everywhere a role falls back to it, the image of
that release, the Mooncake the vllm-ascend images ship, and the guide's release still supported."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.tests.unit.plugins.filter.test_kvpool import ROOT
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import plan


def _role(role, part='defaults'):
    path = os.path.join(ROOT, 'roles', role, part, 'main.yml') if part == 'defaults' else \
        os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml')
    with open(path) as handle:
        return yaml.safe_load(handle)


def _spec_defaults(role, name):
    specs = _role(role, 'specs')['argument_specs']
    return [opts['options'][name]['default'] for opts in specs.values() if name in (opts.get('options') or {})]


def test_the_default_release_is_the_newest_final_one():
    assert vllm_plan.DEFAULT_VERSION == 'v0.23.0'
    assert vllm_plan.preview_warning(vllm_plan.DEFAULT_VERSION) == ''
    assert _role('vllm_instance')['vllm_instance_vllm_ascend_version'] == vllm_plan.DEFAULT_VERSION
    assert set(_spec_defaults('vllm_instance', 'vllm_instance_vllm_ascend_version')) == {vllm_plan.DEFAULT_VERSION}
    fallback = "default('%s')" % vllm_plan.DEFAULT_VERSION
    assert fallback in _role('kvpool_router')['kvpool_router_vllm_ascend_version']
    assert all(fallback in d for d in _spec_defaults('kvpool_router', 'kvpool_router_vllm_ascend_version'))


def test_the_default_image_is_the_default_releases():
    image = 'quay.io/ascend/vllm-ascend:%s' % vllm_plan.DEFAULT_VERSION
    assert _role('vllm_ascend_container')['vllm_ascend_container_image'] == image
    assert set(_spec_defaults('vllm_ascend_container', 'vllm_ascend_container_image')) == {image}


def test_the_default_mooncake_is_what_the_images_ship():
    # Every vllm-ascend image from v0.23.0 to 0.26rc pins mooncake-transfer-engine-npu==0.3.11.post1 (MOONCAKE_TAG).
    assert _role('kvpool_defaults')['kvpool_defaults_mooncake_version'] == '0.3.11.post1'
    assert _spec_defaults('kvpool_defaults', 'kvpool_defaults_mooncake_version') == ['0.3.11.post1']
    assert vllm_plan.RELEASE_TAGS['v0.23'][1] == 'v0.3.11.post1'


def test_the_guides_release_stays_supported():
    p = plan(version='v0.22.1rc1')
    assert p['errors'] == [] and p['warnings'] == []
    assert p['profile']['release'] == 'v0.22' and p['instances'][0]['env']['ASCEND_BUFFER_POOL'] == '4:8'
    assert vllm_plan.GUIDE_VERSION == '0.22.1rc1'
