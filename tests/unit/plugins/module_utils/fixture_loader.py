# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Loader for the recorded tool answers in ``fixtures/``.

A fixture is a text file: ``#@ source: ...`` / ``#@ note: ...`` lines name where the sample comes from,
``#@ rc: N`` gives the exit code, then ``#@ stdout``, ``#@ stderr`` (or ``#@ file`` for configuration
files) open sections whose lines are the bytes the tool printed, unchanged (trailing blanks and tabs
included; ``fixtures/.gitattributes`` keeps git from touching them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os

FIXTURES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
_SECTIONS = ("stdout", "stderr", "file")


def read_answer(name):
    """Return {'rc', 'stdout', 'stderr', 'file', 'sources', 'notes'} for fixture ``name``."""
    with io.open(os.path.join(FIXTURES_DIR, name), "r", encoding="utf-8", newline="") as handle:
        text = handle.read()
    answer = {"rc": 0, "stdout": "", "stderr": "", "file": "", "sources": [], "notes": []}
    current = None
    for line in text.splitlines(True):
        if line.startswith("#@ "):
            tag = line[3:].rstrip("\r\n")
            if tag in _SECTIONS:
                current = tag
            elif tag.startswith("rc:"):
                answer["rc"] = int(tag[3:].strip())
            elif tag.startswith("source:"):
                answer["sources"].append(tag[7:].strip())
            elif tag.startswith("note:"):
                answer["notes"].append(tag[5:].strip())
            else:
                raise ValueError("%s: unknown fixture tag %r" % (name, tag))
            continue
        if current is None:
            raise ValueError("%s: content before the first section marker: %r" % (name, line))
        answer[current] += line
    if not answer["sources"]:
        raise ValueError("%s: a recorded fixture must name its source" % name)
    return answer


def fixture_names(prefix):
    return sorted(name for name in os.listdir(FIXTURES_DIR) if name.startswith(prefix) and name.endswith(".txt"))
