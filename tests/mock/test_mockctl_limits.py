# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""mockctl up raises the host's inotify limits that N systemd nodes need (64 nodes ran out of
fs.inotify.max_user_instances at about 26), or fails at once naming the setting and the fix. Against a copy of
/proc/sys in tmp_path: the tests never write the host's settings."""

import sys
from pathlib import Path

import pytest

from mockctl_module import mockctl

UNIT = str(Path(__file__).resolve().parents[1] / "unit")  # the helper that checks a message by its parts
if UNIT not in sys.path:
    sys.path.insert(0, UNIT)
from messages import assert_names  # noqa: E402

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


def test_a_limit_that_cannot_be_written_but_may_suffice_only_warns(tmp_path, monkeypatch, capsys):
    # not root (a user of the docker group): 200 instances for 30 nodes may do (about 6 each were measured), 100 not
    root = proc_sys(tmp_path, 200, 10 ** 7)

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(type(root), "write_text", refuse)
    mockctl.ensure_inotify(30, root)
    assert_names(capsys.readouterr().out, "warning:", "30 mock nodes", "%s >= 272" % INSTANCES, "(it is 200)")
    with pytest.raises(mockctl.MockError) as err:
        mockctl.ensure_inotify(50, root)
    assert "sysctl -w %s=432" % INSTANCES in str(err.value)


def test_an_unreadable_limit_is_named_so(tmp_path):
    root = proc_sys(tmp_path, 200, 10 ** 7)
    (root / "fs/inotify/max_user_instances").unlink()
    (root / "fs/inotify/max_user_instances").mkdir()  # neither readable as a number nor writable
    with pytest.raises(mockctl.MockError) as err:
        mockctl.ensure_inotify(30, root)
    assert "it is unreadable" in str(err.value)


def test_a_limit_that_cannot_be_raised_fails_naming_the_setting_and_the_fix(tmp_path):
    # /proc/sys not writable (a container without privileges, not root): here a directory that does not exist
    with pytest.raises(mockctl.MockError) as err:
        mockctl.ensure_inotify(64, tmp_path / "nowhere")
    assert INSTANCES in str(err.value) and "sysctl -w %s=" % INSTANCES in str(err.value)
