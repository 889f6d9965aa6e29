# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The test world runs what it declares: the Mooncake version that the mock nodes, the controller's test equipment
and the scenarios install is the one their inventories and vars declare (mooncake_master_mooncake_version), so every
test renders the master's flags for the binary that really runs them (issue 36: the mock once declared 0.3.9 and
ran 0.3.13.post1, which accepted every flag and hid a master that cannot start on 0.3.9)."""

import re
from pathlib import Path

import yaml

from mockctl_module import mockctl

ROOT = Path(__file__).resolve().parents[2]


def load(rel):
    return yaml.safe_load((ROOT / rel).read_text()) or {}


def test_the_mock_nodes_install_the_version_the_sim_inventory_declares():
    assert mockctl.BASE_RECIPE["pip"] == [f"{mockctl.MOONCAKE_PACKAGE}=={mockctl.MOONCAKE_VERSION}"]
    declared = load("inventories/sim/group_vars/all.yml")["mooncake_master_mooncake_version"]
    assert str(declared) == mockctl.MOONCAKE_VERSION


def test_a_generated_inventory_declares_it_too(tmp_path):
    paths = mockctl.Paths(str(tmp_path))
    text = mockctl.inventory_yaml(paths, 3)
    nodes = yaml.safe_load(text)["all"]["children"]["npu_nodes"]
    assert str(nodes["vars"]["mooncake_master_mooncake_version"]) == mockctl.MOONCAKE_VERSION


def test_the_controllers_test_equipment_runs_the_nodes_version():
    pins = re.findall(r"^%s==(\S+)" % re.escape(mockctl.MOONCAKE_PACKAGE),
                      (ROOT / "requirements.txt").read_text(), re.M)
    assert pins == [mockctl.MOONCAKE_VERSION]


def test_the_mooncake_scenario_installs_the_version_it_declares():
    """molecule/mooncake runs the pool on 0.3.11.post1 (what the vllm-ascend images carry, v0.23.0 to 0.26rc),
    installed from its wheel into a virtualenv, whose master and probe it uses."""
    mock = load("molecule/mooncake/vars/mock.yml")
    version = str(mock["mooncake_install_wheel_version"])
    assert version == str(mock["mooncake_master_mooncake_version"]) == "0.3.11.post1"
    venv = mock["mooncake_install_virtualenv"]
    assert mock["mooncake_master_binary"] == venv + "/bin/mooncake_master"
    assert mock["mooncake_config_probe_python"] == venv + "/bin/python"
    prepare = (ROOT / "molecule/mooncake/prepare.yml").read_text()
    assert "mooncake_install_wheel_version" in prepare and "0.3.13.post1" not in prepare


def test_the_releases_scenario_declares_what_the_nodes_run():
    assert str(load("molecule/releases/vars/v023.yml")["mooncake_master_mooncake_version"]) == mockctl.MOONCAKE_VERSION


def test_the_container_test_declares_the_mock_images_version():
    """molecule/instances' container test runs the master in a container of the mock node image."""
    container = load("molecule/instances/vars/container.yml")
    assert container["vllm_ascend_container_image"].startswith(mockctl.NODE_REPO + ":")
    assert str(container["mooncake_master_mooncake_version"]) == mockctl.MOONCAKE_VERSION
