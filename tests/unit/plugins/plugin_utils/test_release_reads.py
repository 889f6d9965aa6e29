# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The table "Who reads what we render" of docs/releases.md is the code's ``vllm_plan.RELEASE_READS``, row for row,
and the plan renders what the table says."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
DOC = os.path.join(ROOT, 'docs', 'releases.md')
_ROW = re.compile(r'^\|(.*)\|\s*$')


def doc_rows():
    with open(DOC) as handle:
        text = handle.read()
    block = text.split('<!-- release-reads:begin -->', 1)[1].split('<!-- release-reads:end -->', 1)[0]
    rows = []
    for line in block.strip().splitlines():
        m = _ROW.match(line.strip())
        assert m, 'not a table row in docs/releases.md: %r' % line
        cells = [c.strip() for c in m.group(1).split('|')]
        if cells[0] == 'key or variable' or set(''.join(cells)) <= set('-'):
            continue
        rows.append(cells)
    return rows


def code_rows():
    out = []
    for key, line, where, reader, source, rendered in vllm_plan.RELEASE_READS:
        out.append(['`%s`' % key, '%s (%s)' % (line, vllm_plan.RELEASE_TAGS[line][0]), where, reader,
                    '; '.join('`%s`' % part for part in source.split('; ')), rendered])
    return out


def test_the_doc_table_is_the_code_table():
    doc, code = doc_rows(), code_rows()
    assert [r[:2] for r in doc] == [r[:2] for r in code], 'rows (key, release) differ: regenerate the table'
    for got, want in zip(doc, code):
        assert got == want


def test_every_row_cites_a_tag_and_a_path_with_a_line():
    for key, line, _where, _reader, source, _rendered in vllm_plan.RELEASE_READS:
        for part in source.split('; '):
            assert re.match(r'^(vllm-ascend|Mooncake)@v[0-9][^:]*:[\w./-]+:\d+$', part), (key, line, part)
    lines = set(r[1] for r in vllm_plan.RELEASE_READS)
    assert lines == set(req['line'] for _since, req in vllm_plan.RELEASES)
    keys = set(r[0] for r in vllm_plan.RELEASE_READS)
    assert all(sum(1 for r in vllm_plan.RELEASE_READS if r[:2] == (k, ln)) == 1 for k in keys for ln in lines)


@pytest.mark.parametrize('line', sorted(vllm_plan.RELEASE_TAGS))
def test_the_plan_renders_what_the_table_says(line):
    tag = vllm_plan.RELEASE_TAGS[line][0]
    rows = dict((r[0], r) for r in vllm_plan.RELEASE_READS if r[1] == line)
    a2 = plan(version=tag, data_address='192.168.7.1')['instances'][0]
    a3 = plan(version=tag, npu_type='a3')['instances'][0]
    assert a2['env']['VLLM_HOST_IP'] == '192.168.7.1' and 'mooncake_config_node_address' in rows['VLLM_HOST_IP'][5]
    assert ('4:8' in rows['ASCEND_BUFFER_POOL'][5]) is (a2['env'].get('ASCEND_BUFFER_POOL') == '4:8')
    assert (rows['HCCL_INTRA_ROCE_ENABLE'][5] == '1 on A2') is (a2['env'].get('HCCL_INTRA_ROCE_ENABLE') == '1')
    assert rows['ASCEND_ENABLE_USE_FABRIC_MEM'][5].startswith('1 on A3')
    assert a3['env']['ASCEND_ENABLE_USE_FABRIC_MEM'] == '1' and 'ASCEND_ENABLE_USE_FABRIC_MEM' not in a2['env']
    assert rows['MOONCAKE_CONFIG_PATH'][5] == 'vllm_instance_mooncake_config_path' and a2['env']['MOONCAKE_CONFIG_PATH']
    ld = a2['path_prepend']['LD_LIBRARY_PATH']
    assert ld == ([vllm_plan.ASCEND_LD_LIBRARY_PATH] if line == 'v0.22'
                  else [vllm_plan.ASCEND_LD_LIBRARY_PATH + '/mooncake', vllm_plan.ASCEND_LD_LIBRARY_PATH])
    assert rows['local_hostname'][3].startswith('nobody') and vllm_plan.READS_LOCAL_HOSTNAME is False
    assert 'MC_STORE_CLUSTER_ID' not in a2['env'] and rows['MC_STORE_CLUSTER_ID'][5].endswith('none without')
    ha = plan(version=tag, mooncake_cluster_id='kvpool-0123456789')['instances'][0]
    assert ha['env']['MC_STORE_CLUSTER_ID'] == 'kvpool-0123456789'
    assert 'kvpool_cluster_id' in rows['MC_STORE_CLUSTER_ID'][5]
