# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Options and attributes shared by the service modules (module_utils/_service.py): DOCUMENTATION for the ones that
    also run in a container (mooncake_master, vllm_server), UNIT for every one (vllm_router runs only as a unit)."""

    DOCUMENTATION = r"""
attributes:
  action:
    support: full
    description: In container mode (O(container)) the action plugin of the module runs the module on the node to
      render the container, M(community.docker.docker_container) to create or update it, and the module again for
      the health gate. In host mode it runs the module once.
  check_mode:
    support: full
    description: Reports whether the service would be started, restarted or stopped, with the diff of its unit file
      (or container definition, and docker_container's own diff, which runs in check mode too), and changes
      nothing. A running service's health is still polled, which only reads.
  diff_mode:
    support: full
    description: The unit file (or the container definition) before and after, one command-line word per line;
      secrets appear by name only (C(<secret>), C(<secret, changed>)).
  idempotent:
    support: full
    description: O(state=restarted) always restarts; the other states change nothing when nothing differs.
options:
  container:
    description:
      - Name of the node's vllm-ascend container (role C(ascend.kvpool.vllm_ascend_container)). When set, the service
        runs in a container of its own made from that container's image, mounts, shared memory size and device
        nodes (only the NPUs of the service), on the host network, with the restart policy C(on-failure) and
        C(restart_retries) O(restart_limit_burst); its logs are C(docker logs <name>).
      - The container is created, recreated when its definition differs, started and removed by
        M(community.docker.docker_container), which the module's action plugin runs on the node between two calls
        of this module (render the definition; then the health gate and, on a failed
        start, the tail of C(docker logs)). The task reports docker_container's C(changed) and diff.
      - Unset runs the service as a systemd unit on the host, logging to the journal (C(journalctl -u <unit>)), in
        one call of the module.
      - The health polls run from the host; the service shares the host network in both cases.
    type: str
  container_step:
    description:
      - Internal, set by the module's action plugin in container mode (O(container)); leave it unset.
      - C(render) returns the M(community.docker.docker_container) arguments of the service container; C(gate)
        runs the health gate after docker_container ran.
    type: str
    choices: [render, gate]
notes:
  - Unit names are C(kvpool-mooncake-master.service) and C(kvpool-vllm-<name>.service) under
    C(/etc/systemd/system) (container names C(kvpool-mooncake-master), C(kvpool-vllm-<name>)). Each unit is
    enabled at boot, ordered after C(network-online.target) (an instance also after the master unit of its host),
    and stopped through its cgroup, so every process it started goes with it.
  - Secrets are never in the unit file (world-readable) but in C(/etc/ascend-kvpool/secrets/<unit>.env), mode
    0600, read through C(EnvironmentFile=).
  - The secret file is the collection's when it starts with its header (or, written by an earlier release, when the
    collection's unit names it); any other file at its path fails the task naming it, in check mode too.
  - In container mode only containers with the label C(ascend.kvpool.managed=1) are recreated, stopped or removed; a
    same-named container without it fails the task naming it. A C(docker inspect) or C(docker ps) that fails for
    another reason than a missing container fails the task naming it; it is never taken as "no container".
  - In container mode the task needs the collection C(community.docker) (declared in C(galaxy.yml)) and what its
    M(community.docker.docker_container) needs on the node (the Docker API through the docker socket, as for the
    role C(ascend.kvpool.vllm_ascend_container)).
"""

    # The systemd-unit options alone, for a service module that runs only as a host unit (vllm_router). The
    # modules that also run in a container (mooncake_master, vllm_server) extend both fragments.
    UNIT = r"""
attributes:
  check_mode:
    support: full
    description: Reports whether the service would be started, restarted or stopped, with the diff of its unit file,
      and changes nothing. A running service's health is still polled, which only reads.
  diff_mode:
    support: full
    description: The unit file before and after, one command-line word per line.
  idempotent:
    support: full
    description: O(state=restarted) always restarts; the other states change nothing when nothing differs.
options:
  log_lines:
    description: Lines of the journal (or C(docker logs)) put into the message of a failed start.
    type: int
    default: 40
  restart_limit_burst:
    description:
      - A service that exits with an error (or is killed) is restarted by systemd (C(Restart=on-failure),
        one second later), at most this many starts in O(restart_limit_interval) seconds
        (C(StartLimitBurst=)); then the unit stays failed and the next run of the task starts it again and, if it
        fails again, names the unit and shows its journal tail. In a container it is the restart policy's maximum retry
        count.
    type: int
    default: 5
  restart_limit_interval:
    description: The window of O(restart_limit_burst), in seconds (C(StartLimitIntervalSec=)).
    type: int
    default: 60
notes:
  - systemctl is called directly (argv lists through C(run_command), C(LANG=C)), so one task decides, writes, starts,
    gates and reports, with the journal tail of a failed start. The unit is enabled at boot, ordered after
    C(network-online.target), restarted by systemd when it dies, and stopped through its cgroup.
  - Ownership - the module writes, replaces and removes only unit files that start with the collection's header
    (C(# Written by ascend.kvpool)) and the link C(systemctl enable) makes. A same-named file without the header, or a
    unit of that name loaded from another file, fails the task naming it and the fix, in check mode too.
  - A C(systemctl show) that fails (C(Failed to connect to bus)) fails the task naming it; it is never taken as
    "not running".
  - Deadlines - every command the module runs on the node (C(systemctl), C(journalctl), in container mode
    C(docker inspect), C(ps), C(logs), C(exec)) runs under coreutils C(timeout -s KILL N). N is 120 seconds, and for
    C(systemctl stop) and C(restart), which wait for the service to stop, twice O(stop_timeout) plus 30 seconds when
    that is longer (systemd waits up to O(stop_timeout) after SIGTERM and again after SIGKILL). A command killed
    there fails the task naming the command, the tool and N; it is never taken as an answer ("not running", "no
    container", "stopped"). Without C(timeout) on the node the task fails before running anything.
"""
