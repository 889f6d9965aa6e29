# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pre-flight check 'upgrade' (the version chain, docs/preflight.md): the target release against the node's
driver, CANN, Mooncake, glibc and image (the other checks' logic, reused), the preview releases (vllm-ascend #14757)
and the release the instances run now (their GET /version: a change leaves the pool cold)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.plugin_utils import preflight, vllm_plan
from ansible_collections.ascend.kvpool.plugins.plugin_utils.preflight import (
    image_release, parse_vllm_version, preflight_findings, version_url,
)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.plugin_utils.test_preflight_releases import node

VLLM = ['python3', '/usr/local/bin/vllm', 'serve', '/m', '--port', '8002']


def running(record, body='{"version": "0.22.1"}', status=200):
    """The record's instance vllm-8002 runs (its port held by its vllm serve) and answers GET /version so."""
    inst = record['plan']['instances'][0]
    record['facts']['ports'] = {'8002': {'listening': True, 'pid': 42, 'cmdline': VLLM, 'address': '0.0.0.0'}}
    record['facts']['http'] = {version_url(inst): {'status': status, 'body': body}}
    return record


def judge(*records, **kw):
    return preflight_findings(list(records), {'checks': kw.get('checks', ['upgrade'])})


def of(result, check='upgrade'):
    return [f for f in result['findings'] if f['check'] == check]


def test_upgrade_is_a_default_check():
    assert 'upgrade' in preflight.CHECKS


def test_the_probe_asks_each_instance_where_its_own_node_reaches_it():
    inst = node('v0.23.0')['plan']['instances'][0]
    assert version_url(inst) == inst['endpoint'] + '/version'
    assert version_url({'url': 'http://10.0.0.1:8002/'}) == 'http://10.0.0.1:8002/version'
    assert version_url({}) == ''


def test_nothing_runs_and_the_node_fits_the_target():
    assert judge(node('v0.23.0', hugepages=210000))['findings'] == []


def test_the_same_release_running_is_no_change():
    assert judge(running(node('v0.23.0'), '{"version": "0.23.0"}'))['findings'] == []


def test_a_release_change_from_the_running_release_warns_that_the_pool_will_be_cold():
    f = of(judge(running(node('v0.23.0'))))
    assert len(f) == 1 and f[0]['severity'] == 'warning' and f[0]['host'] == 'node1'
    assert_names(f[0]['finding'], 'vllm-8002', 'vLLM 0.22.1', 'vllm-ascend v0.23.0', 'release change', 'cold',
                 'recomputes its prefill')
    assert_names(f[0]['fix'], 'one node at a time', 'upgrade.yml')


def test_a_downgrade_is_a_warning_that_names_the_rollback():
    f = of(judge(running(node('v0.22.1rc1'), '{"version": "0.23.0"}')))
    assert len(f) == 1 and f[0]['severity'] == 'warning'
    assert_names(f[0]['finding'], 'downgrade', 'cold')
    assert_names(f[0]['fix'], 'rollback', 'older image')


@pytest.mark.parametrize('body, status, said', [
    ('', None, 'no answer'),
    ('{"detail": "Not Found"}', 404, 'status 404'),
    ('<html>', 200, 'status 200'),
])
def test_an_unknown_running_release_is_a_warning(body, status, said):
    f = of(judge(running(node('v0.23.0'), body, status)))
    assert len(f) == 1 and f[0]['severity'] == 'warning'
    assert_names(f[0]['finding'], 'vllm-8002', 'unknown', said)
    assert_names(f[0]['fix'], 'GET /version')


def test_an_instance_that_does_not_run_is_not_asked_about():
    record = running(node('v0.23.0'))
    record['facts']['ports'] = {'8002': {'listening': False}}
    assert judge(record)['findings'] == []
    record = running(node('v0.23.0'))
    record['facts']['http'] = {}   # not probed (an older role): nothing said
    assert judge(record)['findings'] == []


@pytest.mark.parametrize('version', ['v0.24.0rc1', 'v0.25.1rc1'])
def test_0_24_and_0_25_are_previews_with_the_plans_text(version):
    record = node(version, hugepages=210000)
    f = of(judge(record, checks=['upgrade', 'deprecated']))
    assert len(f) == 1 and f[0]['severity'] == 'warning'
    assert f[0]['finding'] == vllm_plan.preview_warning(version)   # one text, the plan's
    assert 'node1: ' + f[0]['finding'] in record['plan']['warnings']
    assert_names(f[0]['finding'], 'preview', 'vllm-ascend #14757', 'wait')
    assert_names(f[0]['fix'], 'vllm_instance_vllm_ascend_version: v0.23.0')
    assert of(judge(record, checks=['upgrade', 'deprecated']), 'deprecated') == []   # not a setting to drop


@pytest.mark.parametrize('version', ['v0.22.1rc1', 'v0.23.0', 'v0.26.0rc1', 'garbage'])
def test_no_preview_warning_for_other_releases(version):
    assert vllm_plan.preview_warning(version) == ''


def test_known_bad_combinations_come_from_the_checks_that_own_them():
    # Below the target's floors: versions' findings, as the upgrade check's when versions does not run itself.
    bad = node('v0.23.0', master={'mooncake_version': '0.3.9'}, glibc='2.31', hugepages=210000,
               ascend={'driver': {'path': '/usr/local/Ascend/driver/version.info', 'exists': True,
                                  'version': '24.1.rc2'},
                       'toolkit': {'path': '/x', 'version': '9.1.0'}})
    alone = of(judge(bad))
    texts = ' | '.join(f['finding'] for f in alone)
    assert_names(texts, 'Mooncake 0.3.9', 'below 0.3.11.post1', 'HDK driver 24.1.rc2', 'glibc 2.31')
    assert all(f['severity'] == 'error' and f['host'] == 'node1' for f in alone)
    own = judge(bad, checks=['upgrade', 'versions', 'glibc', 'hccl_roce'])
    assert of(own) == [] and len(of(own, 'versions')) == 2 and len(of(own, 'glibc')) == 1   # each once
    # the same texts as the owning checks (shared logic, not copied)
    assert sorted(f['finding'] for f in alone) == sorted(f['finding'] for f in own['findings'])


def test_mooncake_3749_and_hccl_roce_are_reused():
    f = of(judge(node('v0.25.1rc1', master={'mooncake_version': '0.3.12.post1'}, hugepages=210000)))
    assert any('Mooncake issue #3749' in x['finding'] for x in f)
    f = of(judge(node('v0.23.0', hugepages=210000, environment={'HCCL_INTRA_ROCE_ENABLE': '0'})))
    assert len(f) == 1 and f[0]['severity'] == 'error'
    assert_names(f[0]['fix'], 'vllm_instance_npu_type: a2')


def with_image(record, image):
    record['container'] = {'enabled': True, 'image': image, 'runtime': 'docker'}
    return record


@pytest.mark.parametrize('image, version, severity', [
    ('quay.io/ascend/vllm-ascend:v0.22.1rc1', 'v0.23.0', 'error'),       # another line: the wrong settings
    ('quay.io/ascend/vllm-ascend:v0.23.0rc1-a3', 'v0.23.0', 'warning'),  # the same line, another version
    ('quay.io/ascend/vllm-ascend:v0.23.0', 'v0.23.0', None),
    ('quay.io/ascend/vllm-ascend:v0.23.0-a3-openeuler', 'v0.23.0', None),
    ('kvpool-mock-node:latest', 'v0.23.0', None),                         # no release in the tag: not judged
])
def test_the_images_release_against_the_target(image, version, severity):
    f = of(judge(with_image(node(version, hugepages=210000), image), checks=['upgrade', 'versions', 'glibc']))
    if severity is None:
        assert f == []
        return
    assert len(f) == 1 and f[0]['severity'] == severity and f[0]['host'] == 'node1'
    assert_names(f[0]['finding'], image, version)
    assert_names(f[0]['fix'], 'vllm_ascend_container_image', 'quay.io/ascend/vllm-ascend:%s' % version)


@pytest.mark.parametrize('image, release', [
    ('quay.io/ascend/vllm-ascend:v0.23.0', 'v0.23.0'), ('vllm-ascend:v0.25.1rc1-a3', 'v0.25.1rc1'),
    ('registry:5000/vllm-ascend:v0.22.1rc1-openeuler', 'v0.22.1rc1'), ('registry:5000/vllm-ascend', ''),
    ('vllm-ascend:latest', ''), ('vllm-ascend@sha256:abc', ''), ('', ''), (None, ''),
])
def test_image_release(image, release):
    assert image_release(image) == release


@pytest.mark.parametrize('body, parsed', [
    ('{"version": "0.22.1+sim"}', (0, 22, 1)), ('{"version": "0.23.0"}', (0, 23, 0)),
    ('{"version": "0.11.0rc2.dev12+g1234"}', (0, 11, 0)), ('{"version": "0.9"}', (0, 9, 0)),
    ('{"version": 23}', None), ('{"version": "dev"}', None), ('[]', None), ('', None), (None, None),
    ('{"version": "0.2300000000.1"}', None),
])
def test_parse_vllm_version(body, parsed):
    assert parse_vllm_version(body) == parsed


@given(st.one_of(st.none(), st.text(), st.binary(),
                 st.builds(lambda v: json.dumps({'version': v}), st.one_of(st.text(), st.integers(), st.none()))))
def test_parse_vllm_version_never_raises(body):
    got = parse_vllm_version(body)
    assert got is None or (len(got) == 3 and all(isinstance(n, int) and n >= 0 for n in got))


@given(st.one_of(st.none(), st.text()))
def test_image_release_never_raises(image):
    got = image_release(image)
    assert got == '' or vllm_plan.parse_version(got) is not None
