# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared by the tests of the process-managing modules (mooncake_master, vllm_server)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import socket

# `docker exec -i [-e VAR]... NAME argv...` runs argv here (a `-e VAR` without a value is taken from this process's
# environment, as docker does, so argv inherits it); `docker inspect` says the container runs ("gone" does not
# exist). Every call is logged with its arguments.
FAKE_DOCKER = r'''#!/bin/sh
echo "$*" >> "%(log)s"
case "$1" in
  inspect) [ "$4" = "gone" ] && { echo "Error: No such object: $4" >&2; exit 1; }; echo true ;;
  exec) shift 2; while [ "$1" = "-e" ]; do shift 2; done; shift; exec "$@" ;;
esac
'''


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port
