#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_facts
short_description: Read what the KV pool pre-flight checks need from a node in one round trip
version_added: 1.0.0
description:
  - Reads the node's memory (C(/proc/meminfo)), who listens on the given TCP ports (C(/proc/net/tcp),
    C(/proc/net/tcp6) and the owning process's command line), the ephemeral port range and the ports reserved from
    it (C(net.ipv4.ip_local_port_range), C(net.ipv4.ip_local_reserved_ports)), the given model directories, whether TCP
    connections to the given C(host:port) targets succeed, the container runtime and images, the node's
    wall clock and, with O(npu_smi=true), the NPUs as M(ascend.kvpool.npu_smi_facts) reads them.
  - The action plugin of the same name brackets the module with the controller's clock, so the result
    carries the node's clock offset and its uncertainty (half the round trip without the probing time).
  - All probes run concurrently; the module reads only and changes nothing on the node.
  - The judgement (what is a finding, and its fix) is made on the controller by the filter
    C(ascend.kvpool.preflight_findings) (role ascend.kvpool.preflight).
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.read_only
options:
  ports:
    description: TCP ports to report the listener of (any local address, IPv4 and IPv6).
    type: list
    elements: int
    default: []
  paths:
    description:
      - Model directories to inspect; each is reported with C(exists), C(is_dir), C(config) (a
        C(config.json) is in it) and, when I(path_sizes=true), the total size of its files.
    type: list
    elements: path
    default: []
  path_sizes:
    description: Sum the sizes of the files under each of I(paths) (stat only, no reading).
    type: bool
    default: true
  connect:
    description: C(host:port) targets (C([v6]:port) for IPv6) to open a TCP connection to.
    type: list
    elements: str
    default: []
  http:
    description: C(http://) URLs to GET (proxies bypassed), with O(connect_timeout) each, for example the etcd
      members' C(/health), which answers C({"health":"true"}) only while the member's cluster has a quorum, or the
      instances' C(/version) (the release they run now, read by the pre-flight check C(upgrade)).
    type: list
    elements: str
    default: []
  connect_timeout:
    description:
      - Seconds each TCP connection of O(connect) and each request of O(http) may take, above 0 and at most 60.
      - For O(http) it bounds the whole request, from the connection to the last byte of the answer, so a server
        that answers one byte at a time is cut there (RV(http) status null). A redirect (3xx) is returned as its
        status and never followed.
    type: float
    default: 3.0
  command_timeout:
    description:
      - Seconds each command the module runs may take (C(<runtime> image inspect), C(ldd), the master's console
        script interpreter, C(npu-smi)), above 0 and at most 3600. A command still running then is killed with its
        children and reported as timed out.
    type: float
    default: 60
  container_runtime:
    description: Container CLI to look for (on C(PATH)); I(images) are inspected with it.
    type: str
    default: docker
  images:
    description: Images that must be present locally (C(<runtime> image inspect)).
    type: list
    elements: str
    default: []
  npu_smi:
    description:
      - Also read C(npu-smi info) and C(npu-smi info -l), concurrently with the other probes, and return them
        as RV(npu) (the facts of M(ascend.kvpool.npu_smi_facts)), saving that module's round trip.
    type: bool
    default: false
  npu_smi_path:
    description: Path of C(npu-smi); default the one on C(PATH) or in the driver's install directories.
    type: path
  ascend_versions:
    description:
      - Also read the Ascend software versions from the files the vllm-ascend guide mounts into its container
        (C(/etc/ascend_install.info), the driver's C(version.info) in the install path it names) and the CANN
        toolkit's C(ascend_toolkit_install.info) (the first of O(toolkit_info_paths) that exists), returned as
        RV(ascend).
    type: bool
    default: false
  toolkit_info_paths:
    description:
      - Glob patterns of the CANN toolkit's install record, tried in order.
      - Only a regular file is read; a FIFO, a device or a directory there is named in RV(ascend) (C(error)) and
        never opened, so nothing hangs.
    type: list
    elements: str
    default:
      - /usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info
      - /usr/local/Ascend/cann/*-linux/ascend_toolkit_install.info
      - /usr/local/Ascend/cann-*/*-linux/ascend_toolkit_install.info
  glibc:
    description: Also read the node's glibc version (C(ldd --version), as the vllm-ascend guide checks it before
      installing the Mooncake wheel), returned as RV(glibc).
    type: bool
    default: false
  mooncake_binary:
    description:
      - Also read the shared libraries that the Mooncake master's executable links and the dynamic loader cannot
        find (C(ldd)), returned as RV(mooncake_libraries). The executable is a name searched on C(PATH),
        C(/usr/local/bin), C(/usr/local/python3*/bin) and C(/opt/*/bin) (as M(ascend.kvpool.mooncake_master) finds
        it), or a path. Not read when unset.
      - A pip console script of C(mooncake.cli) (what the PyPI wheels put on C(PATH)) is followed to the real
        binary, C(mooncake_master) in the directory where the script's own interpreter finds the package
        C(mooncake). That interpreter is asked (without importing the package), as it knows its C(site-packages),
        C(dist-packages) or C(lib64) layout, which a guess from the script's directory does not.
    type: str
  mooncake_environment:
    description: The master's extra environment (C(mooncake_master_environment)); C(ldd) and the console script's
      interpreter run with it, so an C(LD_LIBRARY_PATH) set there counts.
    type: dict
    default: {}
seealso:
  - module: ascend.kvpool.npu_smi_facts
"""

EXAMPLES = r"""
- name: Read memory, listeners, the model and the master's reachability
  ascend.kvpool.preflight_facts:
    ports: [8002, 50088, 9003]
    paths: [/root/.cache/Qwen2.5-72B-Instruct]
    connect: ["90.90.100.188:50088"]
  register: facts

- name: Show who holds port 8002
  ansible.builtin.debug:
    msg: "{{ facts.ports['8002'] }}"

- name: Read the libraries of the Mooncake master that the node lacks (the console script is followed)
  ascend.kvpool.preflight_facts:
    mooncake_binary: mooncake_master
    mooncake_environment:
      LD_LIBRARY_PATH: /usr/local/lib
  register: facts

- name: Show them
  ansible.builtin.debug:
    msg: "{{ facts.mooncake_libraries.missing }}"
"""

RETURN = r"""
hostname:
  description: The node's host name.
  returned: always
  type: str
memory:
  description: C(/proc/meminfo) values in bytes.
  returned: always
  type: dict
  sample: {MemTotal: 1622512926720, MemAvailable: 1580000000000}
epoch:
  description: The node's wall clock (seconds since the epoch) when the module started its probes.
  returned: always
  type: float
probe_s:
  description: Seconds the probes took after C(epoch) was read (the action plugin takes them out of the round trip).
  returned: always
  type: float
clock:
  description:
    - Added by the action plugin. C(offset_s) is the node's clock minus the controller's at the same instant,
      give or take C(uncertainty_s).
  returned: always
  type: dict
  sample: {offset_s: 0.012, uncertainty_s: 0.15}
ports:
  description:
    - Per port (as a string key), C(listening) and, when something listens, C(address), C(pid) and C(cmdline)
      of the owner (C(pid) is null when the owner cannot be read, e.g. without root), and the command lines of
      its C(ancestors) (parent first, at most 4).
    - Secrets in a command line (the value of C(--api-key), C(--token), C(--password) and other secret-named flags,
      C(NAME=value) words of such names, C(Authorization) and C(Bearer) values, a URL's password) are masked as
      C(********) on the node, before they enter the result.
  returned: always
  type: dict
  sample:
    "8002": {listening: true, address: "90.90.100.188", pid: 4242, cmdline: [python3, /usr/local/bin/vllm, serve]}
ephemeral:
  description:
    - C(range), the first and last port the kernel gives outgoing connections (C(net.ipv4.ip_local_port_range);
      null when unreadable), and C(reserved), the ranges left out of it (C(net.ipv4.ip_local_reserved_ports)).
    - A service port inside the range and not reserved can be taken by any outgoing connection of the node, and a
      listener then cannot bind it until that connection's TIME-WAIT ends.
  returned: always
  type: dict
  sample: {range: [32768, 60999], reserved: [[50088, 50088]]}
paths:
  description: Per path, C(exists), C(is_dir), C(config) and C(size_bytes) (null unless summed).
  returned: always
  type: dict
connect:
  description: Per target, C(ok), C(error) (empty when it connected) and C(ms).
  returned: always
  type: dict
  sample: {"90.90.100.188:50088": {ok: false, error: "[Errno 111] Connection refused", ms: 0.4}}
http:
  description: Per URL of O(http), C(status) (null when nothing answered) and C(body) (its first 300 characters).
  returned: always
  type: dict
  sample: {"http://172.31.250.11:2379/health": {status: 200, body: '{"health":"true"}'}}
container:
  description:
    - C(runtime) (the path of I(container_runtime), or null when it is not on C(PATH)) and C(images) (name to
      presence; null when the runtime is absent or the inspection failed), empty when I(images) is not given.
    - C(errors) (name to the failed inspection's message), only when an inspection failed for another reason than a
      missing image (the daemon not running); the judgement names it instead of a missing image.
  returned: always
  type: dict
npu:
  description:
    - The facts M(ascend.kvpool.npu_smi_facts) returns (C(driver_loaded), C(count), C(npus), C(healthy_npus),
      C(unhealthy_npus), C(processes), C(busy_npus), ...), or C(failed) and C(msg) when npu-smi is missing or
      fails. The module itself does not fail for that, the judgement names it.
  returned: when O(npu_smi=true)
  type: dict
ascend:
  description:
    - C(install_info) (path, C(exists), C(driver_path)), C(driver) (path of C(version.info), C(exists),
      C(version)) and C(toolkit) (path found or null, C(version)); a version is null when its file is missing or
      has no version line.
    - Each has C(error), empty unless its file is there but was not read (not a regular file, such as a FIFO or a
      device, too large, unreadable, not UTF-8), naming the path and the fix.
  returned: when O(ascend_versions=true)
  type: dict
  sample:
    install_info: {path: /etc/ascend_install.info, exists: true, driver_path: /usr/local/Ascend}
    driver: {path: /usr/local/Ascend/driver/version.info, exists: true, version: 25.5.0}
    toolkit: {path: /usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info, version: 9.1.0}
glibc:
  description: C(version) (null when unreadable), C(source) (C(ldd) or C(confstr)) and C(raw) (the first line read).
  returned: when O(glibc=true)
  type: dict
  sample: {version: "2.35", source: ldd, raw: "ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35"}
mooncake_libraries:
  description:
    - C(binary), the real master binary read (null when O(mooncake_binary) is not found, which is no error here; a
      later check names it); C(wrapper), the console script on C(PATH) that runs it (null when O(mooncake_binary)
      is the binary itself); C(missing), the libraries C(ldd) reports C(=> not found); C(raw), those lines of
      C(ldd); C(wheels), the C(mooncake*) distributions installed beside the package (C(name version)); C(error),
      why the libraries could not be read (empty when they were).
  returned: when O(mooncake_binary) is given
  type: dict
  sample:
    binary: /opt/venv/lib/python3.11/site-packages/mooncake/mooncake_master
    wrapper: /opt/venv/bin/mooncake_master
    missing: [libcudart.so.12]
    raw: ["libcudart.so.12 => not found"]
    wheels: [mooncake-transfer-engine-non-cuda 0.3.12.post1]
    error: ""
"""

import glob
import os
import socket
import stat
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors
from ansible_collections.ascend.kvpool.plugins.module_utils import _npu_smi, _preflight, _secrets, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import is_port
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import http_status, split_target, try_connect
from ansible_collections.ascend.kvpool.plugins.module_utils._runner import execute


def read_text(path):
    """The text of a file of ``/proc`` (or ''): the kernel's files, which are never FIFOs or devices."""
    try:
        with open(path, 'r') as handle:
            return handle.read()
    except (IOError, OSError):
        return ''


def read_file(path, limit=1 << 20):
    """``(text, error)`` of a small file of the node (an Ascend version record): ``('', '')`` when it is missing;
    a FIFO, a socket, a device, a directory, a file over ``limit`` bytes, unreadable or not UTF-8 is never read (a
    FIFO is refused before ``open``, so nothing hangs) and ``error`` names the path, what is wrong and the fix."""
    try:
        return _validate.read_text_file(path, limit), ''
    except _validate.FileProblem as exc:
        return '', '' if exc.missing else str(exc)


def argv_of(pid):
    """The command line of ``pid`` with its secrets masked (``_secrets.mask_argv``: an API key, a token, a
    password never leaves the node), or None when unreadable."""
    return _secrets.mask_argv([a for a in read_text('/proc/%d/cmdline' % pid).split('\0') if a]) or None


def socket_owners(inodes):
    """{inode: pid} for the wanted socket inodes (scans /proc/<pid>/fd; unreadable pids are skipped)."""
    owners = {}
    if not inodes:
        return owners
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        fd_dir = '/proc/%s/fd' % entry
        try:
            fds = os.listdir(fd_dir)
        except (IOError, OSError):
            continue
        for fd in fds:
            try:
                inode = _preflight.socket_inode(os.readlink('%s/%s' % (fd_dir, fd)))
            except (IOError, OSError):
                continue
            if inode in inodes and inode not in owners:
                owners[inode] = int(entry)
        if len(owners) == len(inodes):
            break
    return owners


def ancestors(pid, depth=4):
    """Command lines of the parent, grandparent, ... of pid (at most ``depth``, up to init)."""
    out = []
    while pid and pid > 1 and len(out) < depth:
        fields = read_text('/proc/%d/stat' % pid).rsplit(')', 1)
        try:
            pid = int(fields[1].split()[1])
        except (IndexError, ValueError):
            break
        if pid <= 1:
            break
        out.append(argv_of(pid) or [])
    return out


def port_listeners(ports):
    tcp = read_text('/proc/net/tcp')
    if ports and not tcp:  # it always has its header line: nothing read is a failed read, never "every port free"
        raise KvpoolError('/proc/net/tcp cannot be read on this node, so whether ports %s are taken is unknown: run '
                          'the pre-flight as root on a Linux node (a /proc mounted with hidepid hides it)'
                          % ', '.join(str(p) for p in ports))
    listening = _preflight.parse_net_tcp(tcp) + _preflight.parse_net_tcp(read_text('/proc/net/tcp6'))
    wanted = [s for s in listening if s['port'] in ports]
    owners = socket_owners(set(s['inode'] for s in wanted if s['inode']))
    out = {}
    for port in ports:
        socks = [s for s in wanted if s['port'] == port]
        if not socks:
            out[str(port)] = {'listening': False}
            continue
        sock = next((s for s in socks if owners.get(s['inode'])), socks[0])
        pid = owners.get(sock['inode'])
        cmdline = argv_of(pid) if pid else None
        out[str(port)] = {'listening': True, 'address': sock['address'], 'pid': pid, 'cmdline': cmdline,
                          'addresses': sorted(set(s['address'] for s in socks)), 'ancestors': ancestors(pid)}
    return out


def inspect_path(path, sizes):
    info = {'exists': os.path.exists(path), 'is_dir': os.path.isdir(path), 'config': False, 'size_bytes': None,
            'files': None}
    if info['is_dir']:
        info['config'] = os.path.isfile(os.path.join(path, 'config.json'))
        if sizes:
            total, count = 0, 0
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in files:
                    try:
                        total += os.stat(os.path.join(root, name)).st_size
                        count += 1
                    except OSError:
                        continue
            info['size_bytes'], info['files'] = total, count
    return info


def container_facts(module, runtime, images, timeout=60):
    # The runtime is always looked up: a null runtime must mean "not on PATH", never "not looked for".
    path = module.get_bin_path(runtime)
    if not images:
        return {'runtime': path, 'images': {}}
    if not path:
        return {'runtime': None, 'images': dict((i, None) for i in images)}
    present, errors = {}, {}
    for image in images:
        rc, dummy, err = execute([path, 'image', 'inspect', '--format', '{{.Id}}', image], timeout=timeout)[:3]
        present[image] = rc == 0
        # Only the runtime's own "no such image" is an answer; any other failure (the daemon down, a timeout) is
        # an error of the read, never "the image is missing".
        if rc != 0 and not any(word in (err or '').lower() for word in ('no such image', 'image not known')):
            present[image] = None
            said = (err or '').strip().splitlines() or ['exit status %d' % rc]
            errors[image] = '%s image inspect %s: %s' % (runtime, image, said[-1][:300])
    out = {'runtime': path, 'images': present}
    if errors:
        out['errors'] = errors
    return out


def ascend_versions(toolkit_patterns):
    """The Ascend version records (RETURN ascend). Each is read only when it is a regular file: a FIFO or a device
    at a record's path (or a toolkit info path) is named in that record's ``error``, never opened."""
    info_text, info_error = read_file(_preflight.ASCEND_INSTALL_INFO)
    driver_path = _preflight.driver_install_path(info_text)
    version_info = os.path.join(driver_path, 'driver', 'version.info')
    version_text, version_error = read_file(version_info)
    toolkit = None
    for pattern in toolkit_patterns:
        found = sorted(glob.glob(pattern))
        if found:
            toolkit = found[0]
            break
    toolkit_text, toolkit_error = read_file(toolkit) if toolkit else ('', '')
    return {
        'install_info': {'path': _preflight.ASCEND_INSTALL_INFO,
                         'exists': os.path.isfile(_preflight.ASCEND_INSTALL_INFO), 'driver_path': driver_path,
                         'error': info_error},
        'driver': {'path': version_info, 'exists': os.path.isfile(version_info),
                   'version': _preflight.driver_version(version_text), 'error': version_error},
        'toolkit': {'path': toolkit, 'version': _preflight.toolkit_version(toolkit_text) if toolkit else None,
                    'error': toolkit_error},
    }


def glibc_facts(module, timeout=30):
    ldd = module.get_bin_path('ldd')
    if ldd:
        rc, out, err = execute([ldd, '--version'], timeout=timeout)[:3]
        first = ((out or '') + (err or '')).strip().splitlines()[:1]
        version = _preflight.glibc_version(first[0] if first else '')
        if version:
            return {'version': version, 'source': 'ldd', 'raw': first[0]}
    try:
        text = os.confstr('CS_GNU_LIBC_VERSION')
    except (AttributeError, ValueError, OSError):
        text = ''
    return {'version': _preflight.glibc_version(text or ''), 'source': 'confstr', 'raw': text or ''}


def find_master(module, name):
    """The master executable as mooncake_master finds it (a path when it is an executable file; a bare name on PATH
    and the glob directories of _preflight.MASTER_BINARY_DIRS), or None."""
    if '/' in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    dirs = []
    for pattern in _preflight.MASTER_BINARY_DIRS:
        dirs.extend(sorted(glob.glob(pattern)) if '*' in pattern else [pattern])
    return module.get_bin_path(name, opt_dirs=dirs)


def read_head(path, size=8192):
    """The first ``size`` bytes of a regular file, or b'' (a FIFO or device at the path is never opened for a
    blocking read, so nothing hangs)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0) | getattr(os, 'O_NOCTTY', 0))
    except OSError:
        return b''
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else b''
    except OSError:
        return b''
    finally:
        os.close(fd)


def mooncake_libraries(module, name, env, timeout=30):
    """What the master binary links and the node lacks (RETURN mooncake_libraries)."""
    out = {'binary': None, 'wrapper': None, 'missing': [], 'raw': [], 'wheels': [], 'error': ''}
    found = find_master(module, name)
    if not found:
        return out
    binary = os.path.realpath(found)
    head = read_head(binary)
    interpreter = None if head.startswith(b'\x7fELF') else \
        _preflight.console_script_interpreter(head.decode('utf-8', 'replace'))
    if interpreter:
        out['wrapper'] = found
        rc, stdout, stderr = execute(interpreter + ['-c', _preflight.MOONCAKE_LOCATE_CODE], timeout=timeout,
                                     env=env)[:3]
        locations = _preflight.mooncake_locations(stdout) if rc == 0 else []
        real = [os.path.join(d, 'mooncake_master') for d in locations]
        binary = next((b for b in real if os.path.isfile(b)), None)
        for location in locations:
            for info in sorted(glob.glob(os.path.join(os.path.dirname(location), 'mooncake*.dist-info'))):
                wheel = _preflight.wheel_of_dist_info(info)
                if wheel and wheel not in out['wheels']:
                    out['wheels'].append(wheel)
        if not binary:
            if rc != 0:
                why = ((stderr or stdout).strip().splitlines() or ['exit status %d' % rc])[-1]
            elif locations:
                why = 'no mooncake_master in %s' % ', '.join(locations)
            else:
                why = 'its interpreter does not find the package mooncake'
            out['error'] = 'the console script %s (%s) does not lead to a binary: %s' % (
                found, ' '.join(interpreter), why)
            return out
    out['binary'] = binary
    ldd = module.get_bin_path('ldd')
    if not ldd:
        out['error'] = 'ldd not found on this node'
        return out
    rc, stdout, stderr = execute([ldd, binary], timeout=timeout, env=env)[:3]
    # ldd exits 1 for a binary that lacks a library too (its stdout then names it); any other failure is reported
    if rc != 0 and not _preflight.parse_ldd_missing(stdout) and 'not a dynamic executable' not in (stderr or ''):
        out['error'] = 'ldd %s: %s' % (binary, ((stderr or stdout or '').strip().splitlines()
                                                or ['timed out' if rc == -9 else 'exit status %d' % rc])[-1])
    out['raw'] = _preflight.ldd_not_found(stdout)
    out['missing'] = _preflight.parse_ldd_missing(stdout)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ports=dict(type='list', elements='int', default=[]),
            paths=dict(type='list', elements='path', default=[]),
            path_sizes=dict(type='bool', default=True),
            connect=dict(type='list', elements='str', default=[]),
            http=dict(type='list', elements='str', default=[]),
            connect_timeout=dict(type='float', default=3.0),
            command_timeout=dict(type='float', default=60),
            container_runtime=dict(type='str', default='docker'),
            images=dict(type='list', elements='str', default=[]),
            npu_smi=dict(type='bool', default=False),
            npu_smi_path=dict(type='path'),
            ascend_versions=dict(type='bool', default=False),
            toolkit_info_paths=dict(type='list', elements='str', default=list(_preflight.TOOLKIT_INFO_GLOBS)),
            glibc=dict(type='bool', default=False),
            mooncake_binary=dict(type='str'),
            mooncake_environment=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    """The module's work: returns its result or raises KvpoolError; main() answers the task with either."""
    p = module.params
    bad = [port for port in p['ports'] if not is_port(port)]
    if bad:
        raise KvpoolError('ports must be TCP ports 1-65535, got %s' % bad)
    _validate.number_range(p['connect_timeout'], 'connect_timeout', above=0, high=60,
                           why='seconds; the role\'s preflight_connect_timeout')
    bad = [t for t in p['connect'] if not _valid_target(t)]
    if bad:
        raise KvpoolError('connect targets must be host:port (or [v6]:port), got %s' % bad)
    bad = [u for u in p['http'] if not str(u).startswith('http://')]
    if bad:
        raise KvpoolError('http: give http:// URLs, got %s' % bad)
    master_env = _validate.environment(p['mooncake_environment'], 'mooncake_environment')
    _validate.number_range(p['command_timeout'], 'command_timeout', above=0, high=3600, why='seconds')
    command_timeout = p['command_timeout']
    epoch = time.time()
    started = time.monotonic()
    npu_smi = None
    if p['npu_smi']:
        npu_smi = p['npu_smi_path'] or module.get_bin_path('npu-smi', opt_dirs=_npu_smi.SEARCH_DIRS)
    with ThreadPoolExecutor(max_workers=6 + len(p['connect']) + len(p['http'])) as pool:
        npus = pool.submit(_npu_smi.read, npu_smi, False, command_timeout) if npu_smi else None
        ports = pool.submit(port_listeners, sorted(set(p['ports'])))
        paths = [(path, pool.submit(inspect_path, path, p['path_sizes'])) for path in p['paths']]
        connects = [(t, pool.submit(try_connect, t, p['connect_timeout'])) for t in p['connect']]
        gets = [(u, pool.submit(http_status, u, p['connect_timeout'], None, None, 300)) for u in p['http']]
        container = pool.submit(container_facts, module, p['container_runtime'], p['images'], command_timeout)
        ascend = pool.submit(ascend_versions, p['toolkit_info_paths']) if p['ascend_versions'] else None
        glibc = pool.submit(glibc_facts, module, command_timeout) if p['glibc'] else None
        libraries = pool.submit(mooncake_libraries, module, p['mooncake_binary'], master_env, command_timeout) \
            if p['mooncake_binary'] else None
        result = dict(
            changed=False,
            hostname=socket.gethostname(),
            memory=_preflight.parse_meminfo(read_text('/proc/meminfo')),
            ephemeral=dict(range=_preflight.parse_port_range(read_text(_preflight.PORT_RANGE_PATH)),
                           reserved=_preflight.parse_reserved_ports(read_text(_preflight.RESERVED_PORTS_PATH))),
            epoch=epoch,
            ports=ports.result(),
            paths=dict((path, f.result()) for path, f in paths),
            connect=dict((t, f.result()) for t, f in connects),
            http=dict((u, dict(zip(('status', 'body'), f.result()))) for u, f in gets),
            container=container.result(),
        )
        if p['npu_smi']:
            result['npu'] = npus.result() if npus else dict(failed=True, msg=_npu_smi.NOT_FOUND)
        if ascend:
            result['ascend'] = ascend.result()
        if glibc:
            result['glibc'] = glibc.result()
        if libraries:
            result['mooncake_libraries'] = libraries.result()
    result['probe_s'] = round(time.monotonic() - started, 4)
    return result


def _valid_target(target):
    try:
        split_target(target)
    except ValueError:
        return False
    return True


if __name__ == '__main__':
    main()
