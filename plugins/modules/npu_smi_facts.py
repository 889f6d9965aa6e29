#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: npu_smi_facts
short_description: Read NPU count, health, HBM use and running processes of an Ascend node with npu-smi
version_added: 1.0.0
description:
  - Runs C(npu-smi info), C(npu-smi info -l) and C(npu-smi info -t topo) concurrently and parses their text.
  - The topology matrix (C(HCCS), C(HCCS_SW), C(SIO), C(PIX), C(SYS), ... per NPU pair) comes with the product
    family read from the chip name and the topology that family should have (Atlas 800T A2, HCCS between every
    pair of its 8 NPUs); M(ascend.kvpool.hccn_facts) judges the pairs an instance uses against it.
  - Reports the driver as not loaded (instead of failing) when C(npu-smi) prints
    C(dcmi module initialize failed), so that a verification play can name it in its summary.
  - Reads only; changes nothing on the node.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.read_only
options:
  npu_smi_path:
    description: Path of C(npu-smi); searched on C(PATH) and in C(/usr/local/bin) and C(/usr/local/sbin) when omitted.
    type: path
  topology:
    description: Also read C(npu-smi info -t topo) (in the same fan-out) and return RV(topology).
    type: bool
    default: true
  command_timeout:
    description: Seconds each C(npu-smi) call may take (above 0, at most 3600); a call still running then is killed
      with its children and the task fails naming it.
    type: float
    default: 120
seealso:
  - module: ascend.kvpool.hccn_facts
"""

EXAMPLES = r"""
- name: Read the NPUs
  ascend.kvpool.npu_smi_facts:
  register: npu

- name: Require 8 healthy NPUs
  ansible.builtin.assert:
    that:
      - npu.driver_loaded
      - npu.healthy_npus | length >= 8
"""

RETURN = r"""
driver_loaded:
  description: False when npu-smi could not initialise the driver interface (dcmi).
  returned: always
  type: bool
driver_error:
  description: The raw error line when npu-smi cannot open the driver interface.
  returned: when the driver is not loaded
  type: str
  sample: "dcmi module initialize failed. ret is -8005"
driver_message:
  description: What the error means (driver not loaded, or the NPUs held by another process or container).
  returned: when the driver is not loaded
  type: str
version:
  description: npu-smi version from the table header.
  returned: always
  type: str
  sample: 24.1.0.3
count:
  description: Number of NPUs (C(Total Count) of C(npu-smi info -l), else the rows of the table).
  returned: always
  type: int
  sample: 8
npus:
  description: One entry per NPU row pair of the table, with C(healthy) added.
  returned: always
  type: list
  elements: dict
  sample:
    - {npu: 0, name: 910B3, health: OK, healthy: true, chip: 0, bus_id: "0000:C1:00.0",
       hbm_used_mb: 3382, hbm_total_mb: 65536, power_w: 98.9, temp_c: 38}
healthy_npus:
  description: Ids of NPUs whose Health is C(OK).
  returned: always
  type: list
  elements: int
unhealthy_npus:
  description: Ids, health and table row of NPUs whose Health is not C(OK).
  returned: always
  type: list
  elements: dict
  sample: [{npu: 5, health: Alarm, raw: "| 5     910B3               | Alarm         | 98.9        38   0    / 0 |"}]
processes:
  description: Processes running on NPUs (from the process table).
  returned: always
  type: list
  elements: dict
busy_npus:
  description: Ids of NPUs that run at least one process.
  returned: always
  type: list
  elements: int
topology:
  description:
    - The NPU-to-NPU matrix of C(npu-smi info -t topo). C(links) maps each NPU id (string) to the link word to
      every other NPU id; C(label) is C(NPU) or C(Phy-ID) (A3); C(family) (C(a2), C(a3), C(training),
      C(inference), C(generic)) and C(expected) say what the node's model should show; C(error) is set when
      npu-smi printed no matrix.
  returned: when O(topology) is true and the driver answers
  type: dict
  sample:
    label: NPU
    ids: [0, 1]
    links: {"0": {"0": X, "1": HCCS}, "1": {"0": HCCS, "1": X}}
    affinity: {"0": 144-167, "1": 144-167}
    family: a2
    expected: "Atlas A2 (910B): HCCS between every pair of the 8 NPUs of a board"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors
from ansible_collections.ascend.kvpool.plugins.module_utils import _npu_smi, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError


def main():
    module = AnsibleModule(
        argument_spec=dict(npu_smi_path=dict(type='path'), topology=dict(type='bool', default=True),
                           command_timeout=dict(type='float', default=120)),
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    """The module's work: returns its result or raises KvpoolError; main() answers the task with either."""
    _validate.number_range(module.params['command_timeout'], 'command_timeout', above=0, high=3600, why='seconds')
    tool = module.params['npu_smi_path'] or module.get_bin_path('npu-smi', opt_dirs=_npu_smi.SEARCH_DIRS)
    if not tool:
        raise KvpoolError(_npu_smi.NOT_FOUND)

    res = _npu_smi.read(tool, module.params['topology'], module.params['command_timeout'])
    if res.get('failed'):
        raise KvpoolError(res['msg'])
    return dict(changed=False, **res)


if __name__ == '__main__':
    main()
