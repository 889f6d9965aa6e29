# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every deferred import of the filter plugins (``lazy.module`` / ``lazy.function``, by name in a string) names a
module and function that exist: a rename that static checks cannot see fails here, not in a play."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import re
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[4] / 'plugins'
REFERENCE = re.compile(r"lazy\.(module|function)\(\s*'([\w.]+)'(?:\s*,\s*'(\w+)')?")
REFERENCES = sorted({(str(path.relative_to(PLUGINS)), m.group(2), m.group(3) or '')
                     for path in PLUGINS.rglob('*.py') for m in REFERENCE.finditer(path.read_text())})


def test_the_filters_use_deferred_imports():
    assert len(REFERENCES) >= 10, REFERENCES


@pytest.mark.parametrize('where, module, function', REFERENCES)
def test_each_deferred_import_resolves(where, module, function):
    target = importlib.import_module('ansible_collections.ascend.kvpool.plugins.' + module)
    assert not function or callable(getattr(target, function, None)), (
        '%s: lazy reference to %s.%s, which does not exist: point it at the module that defines it'
        % (where, module, function))
