# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""mockctl up raises the host's inotify limits that N systemd nodes need (64 nodes ran out of
fs.inotify.max_user_instances at about 26), or fails at once naming the setting and the fix. Against a copy of
/proc/sys in tmp_path: the tests never write the host's settings."""

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mockctl():
    loader = importlib.machinery.SourceFileLoader("mockctl_limits", str(ROOT / "tests/mock/mockctl"))
    spec = importlib.util.spec_from_loader("mockctl_limits", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


mockctl = _mockctl()
INSTANCES = "fs.inotify.max_user_instances"
WATCHES = "fs.inotify.max_user_watches"


def proc_sys(tmp_path, instances, watches):
    d = tmp_path / "fs/inotify"
    d.mkdir(parents=True)
    (d / "max_user_instances").write_text("%d\n" % instances)
    (d / "max_user_watches").write_text("%d\n" % watches)
    return tmp_path


def read(root, name):
    return int((root / name.replace(".", "/")).read_text())


def test_linux_defaults_are_raised_for_64_nodes(tmp_path):
    root = proc_sys(tmp_path, 128, 65536)
    mockctl.ensure_inotify(64, root)
    assert read(root, INSTANCES) >= 64 * 5 + 128 and read(root, WATCHES) >= 64 * 8192


def test_a_few_nodes_change_nothing_and_higher_limits_are_never_lowered(tmp_path):
    root = proc_sys(tmp_path, 128, 192914)
    mockctl.ensure_inotify(2, root)
    assert (read(root, INSTANCES), read(root, WATCHES)) == (128, 192914)
    root2 = proc_sys(tmp_path / "b", 100000, 10 ** 7)
    mockctl.ensure_inotify(64, root2)
    assert (read(root2, INSTANCES), read(root2, WATCHES)) == (100000, 10 ** 7)


def test_a_limit_that_cannot_be_raised_fails_naming_the_setting_and_the_fix(tmp_path):
    # /proc/sys not writable (a container without privileges, not root): here a directory that does not exist
    with pytest.raises(mockctl.MockError) as err:
        mockctl.ensure_inotify(64, tmp_path / "nowhere")
    assert INSTANCES in str(err.value) and "sysctl -w %s=" % INSTANCES in str(err.value)
