# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The guide's vLLM instance as the role's defaults describe it, and its plan (tests' helper)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan

# The role's defaults: the guide's instance on the guide's release.
GUIDE = dict(
    version='v0.22.1rc1', npu_type='a2', model_path='/root/.cache/Qwen2.5-72B-Instruct',
    serve_flags={'vllm_instance_served_model_name': 'qwen', 'vllm_instance_dtype': 'bfloat16',
                 'vllm_instance_max_model_len': 25600, 'vllm_instance_max_num_batched_tokens': 4096,
                 'vllm_instance_gpu_memory_utilization': 0.9},
    listen_host='90.90.100.188', host_ip='', data_address='90.90.100.188', node_address='90.90.100.188',
    kv_connector='', kv_role='kv_both',
    kv_connector_extra_config={'use_layerwise': False, 'load_async': True}, register_buffer=None,
    ascend_buffer_pool='', kv_transfer_extra={}, environment={}, python_hash_seed='0',
    ld_library_path=[], mooncake_config_path='/etc/ascend-kvpool/mooncake.json',
    extra_args=[], reserved_ports={},
)
ONE = [{'devices': [0, 1, 2, 3], 'port': 8002}]


def plan(instances=None, **settings):
    s = dict(GUIDE)
    s.update(settings)
    return vllm_plan.plan_instances(ONE if instances is None else instances, s, 'node1')
