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
version_added: 0.1.0
description:
  - Runs C(npu-smi info) and C(npu-smi info -l) concurrently and parses their text.
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
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _npu_smi


def main():
    module = AnsibleModule(
        argument_spec=dict(npu_smi_path=dict(type='path')),
        supports_check_mode=True,
    )
    tool = module.params['npu_smi_path'] or module.get_bin_path('npu-smi', opt_dirs=_npu_smi.SEARCH_DIRS)
    if not tool:
        module.fail_json(msg=_npu_smi.NOT_FOUND)

    res = _npu_smi.read(tool)
    if res.get('failed'):
        module.fail_json(msg=res['msg'])
    module.exit_json(changed=False, **res)


if __name__ == '__main__':
    main()
