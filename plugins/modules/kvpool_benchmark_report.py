#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kvpool_benchmark_report
short_description: Write the KV pool TTFT benchmark report (JSON, Markdown, PNG) on the controller
version_added: 1.0.0
description:
  - Builds the report of the guide's three-step TTFT benchmark from the results of
    M(ascend.kvpool.kvpool_benchmark) and writes it on the controller, whatever host the task targets
    (an action plugin; nothing runs on a node).
  - The JSON holds every step's statistics, dataset fingerprint, hit counters and master state, the checks and
    the summary lines. The Markdown shows the guide's table (TTFT1, TTFT2, TTFT3) next to the guide's own
    numbers, clearly labelled as a reference measured on other hardware, then per-step detail. The PNG charts
    median and p90 TTFT of the three steps with each step's prefix-cache and external (pool) hit rates.
  - Runs against the simulated mock cluster are labelled SIMULATED in every artifact (the label is also set
    automatically when the instances' C(/metrics) show the simulated stand-in).
  - Checks whether the run shows what the guide shows - step 1 cold, dataset B pushing A out of device memory,
    pool hits on instance 1 in step 2, cross-node pool hits on instance 2 in step 3 (none is flagged as
    C(PYTHONHASHSEED mismatch or pool not shared)), TTFT1 > TTFT3 > TTFT2, no failed request, one dataset A.
  - Every step carries C(concurrency) - the concurrency asked for and the one its client really held (AISBench's
    own C(Concurrency), or the built-in client's mean requests in flight) and the client (C(builtin client) or
    C(AISBench)); a step below half of what was asked is flagged (C(concurrency_flags), C(FLAG low_concurrency)),
    like a client-vs-server TTFT gap beyond 10% (C(ttft_flags)). Flags do not fail the run.
  - A failed AISBench step carries the last lines of its output (C(output_tail), the API key replaced) in the
    JSON, the summary and the Markdown.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
attributes:
  check_mode:
    support: full
    description:
      - In check mode (C(--check), also on a task with C(check_mode=false)) the report is built and summarised but
        no file is written; the last summary line says where a run writes them.
  diff_mode:
    support: none
    description: The report is an output of the run, not managed state.
  idempotent:
    support: full
    description: Always returns C(changed=false); the files are rewritten with the same content for the same results.
options:
  results:
    description:
      - The registered results of M(ascend.kvpool.kvpool_benchmark) by step - C(step1), C(flush) (dataset B),
        C(step2), C(step3). Missing or skipped steps are reported as not run, failed ones with their message.
    type: dict
    required: true
  report_dir:
    description:
      - Controller directory of the report files.
      - >-
        A file already at one of the report's paths is replaced only when the collection wrote it (the JSON's
        top-level C(written_by), the Markdown's first line C(<!-- Written by ascend.kvpool...), the PNG's text
        chunk C(Software) with the value C(ascend.kvpool.kvpool_benchmark_report), or a report of an earlier
        release by its layout); any other file fails the task naming it before any file is written, in check mode
        too.
    type: path
    required: true
  basename:
    description: File name without extension (C(.json), C(.md), C(.png) are added); 1-64 letters, digits, C(.),
      C(_) or C(-), starting with a letter or digit.
    type: str
    default: kvpool_benchmark
  label:
    description: Shown in every artifact (for example the cluster name, or that it is simulated).
    type: str
    default: ''
  test_equipment:
    description:
      - The real engine of a run on test equipment that is no hardware either, for example C(real vLLM engine (CPU
        build, tiny model)). The Markdown report and the chart then say TEST EQUIPMENT with it and that the timings
        are not hardware figures. A run on the simulated stand-in is labelled SIMULATED instead, whatever this says.
    type: str
    default: ''
  settings:
    description: The benchmark settings, stored in the report as given.
    type: dict
    default: {}
  instances:
    description: Which instances played 1 and 2 and the master, stored in the report as given.
    type: dict
    default: {}
  chart:
    description: Draw the PNG chart (needs matplotlib in the controller's Python; without it a warning is given).
    type: bool
    default: true
seealso:
  - module: ascend.kvpool.kvpool_benchmark
"""

EXAMPLES = r"""
- name: Write the report
  ascend.kvpool.kvpool_benchmark_report:
    results:
      step1: "{{ step1 }}"
      flush: "{{ flush }}"
      step2: "{{ step2 }}"
      step3: "{{ step3 }}"
    report_dir: "{{ inventory_dir }}/reports"
    label: lab cluster A
  register: bench_report

- name: Show it
  ansible.builtin.debug:
    msg: "{{ bench_report.summary }}"
"""

RETURN = r"""
report:
  description: The whole report (as written to the JSON file).
  returned: always
  type: dict
summary:
  description: The summary lines (one per step, with a failed AISBench step's output tail under it, then every
    finding and flag, then the files).
  returned: always
  type: list
  elements: str
ok:
  description: True when every check passed.
  returned: always
  type: bool
files:
  description: Paths of the files written (C(json), C(markdown), C(chart)); empty in check mode.
  returned: always
  type: dict
written:
  description: Whether the files were written (false in check mode).
  returned: always
  type: bool
report_line:
  description: "The line that says where the report is: C(report: <files>); in check mode a line that starts with
    C(check mode: no report written) and names what a run writes."
  returned: always
  type: str
"""
