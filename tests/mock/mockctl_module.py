# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/mock/mockctl (a script without .py) loaded once as a module, for the tests of the mock equipment: a helper
module, not a test module."""

import importlib.machinery
import importlib.util
from pathlib import Path

MOCKCTL = Path(__file__).resolve().parent / "mockctl"


def _load():
    loader = importlib.machinery.SourceFileLoader("mockctl", str(MOCKCTL))
    spec = importlib.util.spec_from_loader("mockctl", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


mockctl = _load()
