# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test equipment for the benchmark tests: a REAL ``mooncake_master`` and two (or more) SIMULATED ``vllm serve``
stand-ins (tests/mock/vllm) on loopback, sharing one Mooncake pool, as the mock cluster's two nodes do.

Found as in tests/mock/test_vllm_standin.py: ``mooncake_master`` from $KVPOOL_TEST_MOONCAKE_MASTER or PATH (the
venv's bin), a Python that imports ``mooncake.store`` from $KVPOOL_TEST_MOONCAKE_PYTHON, the master's entry
script interpreter, this interpreter or /usr/bin/python3. ``find()`` returns ``(master, python)`` or a reason.
Traffic stays on 127.0.0.1.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
VLLM = REPO / 'tests' / 'mock' / 'vllm' / 'vllm'
MODEL_NAME = 'Qwen2.5-72B-Instruct'
SERVED = 'qwen'
KV = {'kv_connector': 'AscendStoreConnector', 'kv_role': 'kv_both',
      'kv_connector_extra_config': {'use_layerwise': False, 'load_async': True}}


def _imports_mooncake(python):
    try:
        return subprocess.run([python, '-c', 'from mooncake.store import MooncakeDistributedStore'],
                              capture_output=True, check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find():
    """``(master path, python)`` or ``(None, reason)``."""
    bin_dir = Path(sys.executable).parent
    master = os.environ.get('KVPOOL_TEST_MOONCAKE_MASTER') or shutil.which('mooncake_master') or \
        (str(bin_dir / 'mooncake_master') if (bin_dir / 'mooncake_master').exists() else None)
    if not master or not os.access(master, os.X_OK):
        return None, ('mooncake_master not found: set KVPOOL_TEST_MOONCAKE_MASTER or put it on PATH '
                      '(pip install mooncake-transfer-engine-non-cuda==0.3.13.post1)')
    candidates = [os.environ.get('KVPOOL_TEST_MOONCAKE_PYTHON')]
    try:
        with open(master, 'rb') as handle:
            first = handle.readline().decode('utf-8', 'replace')
        if first.startswith('#!') and 'python' in first:
            candidates.append(first[2:].strip().split()[0])
    except OSError:
        pass
    candidates += [sys.executable, '/usr/bin/python3']
    for python in candidates:
        if python and os.path.exists(python) and _imports_mooncake(python):
            return master, python
    return None, 'no Python that imports mooncake.store: set KVPOOL_TEST_MOONCAKE_PYTHON'


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def listening(port):
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=0.2):
            return True
    except OSError:
        return False


def _healthy(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _stop(proc, timeout=15, signalled=False):
    if proc.poll() is None:
        if not signalled:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Cluster:
    """A master and named instances; ``start()`` waits until all are healthy; ``stop()`` ends them (SIGTERM)."""

    def __init__(self, workdir, master_bin, python, sim_args=(), seeds=None, env=None):
        self.workdir = Path(workdir)
        self.master_bin = master_bin
        self.python = python
        self.sim_args = list(sim_args)
        self.seeds = seeds or {'node1': '0', 'node2': '0'}
        self.extra_env = dict(env or {})
        self.procs = []
        self.logs = []
        self.instances = {}
        self.master_metrics = None

    def _log(self, name):
        handle = open(self.workdir / ('%s.log' % name), 'w')
        self.logs.append(handle)
        return handle

    def start(self, timeout=60):
        model = self.workdir / MODEL_NAME
        model.mkdir(exist_ok=True)
        (model / 'config.json').write_text(json.dumps({'model_type': 'qwen2', 'max_position_embeddings': 32768}))
        rpc, metrics = free_port(), free_port()
        master = subprocess.Popen([self.master_bin, '--rpc_port', str(rpc), '--rpc_address', '127.0.0.1',
                                   '--metrics_port', str(metrics), '--eviction_high_watermark_ratio', '0.95',
                                   '--eviction_ratio', '0.05'], stdout=self._log('master'), stderr=subprocess.STDOUT)
        self.procs.append(master)
        deadline = time.monotonic() + timeout
        while not (listening(rpc) and _healthy('http://127.0.0.1:%d/health' % metrics)):
            if master.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError('mooncake_master did not start: %s' % self.text('master')[-2000:])
            time.sleep(0.1)
        self.master_metrics = 'http://127.0.0.1:%d/metrics' % metrics
        config = self.workdir / 'mooncake.json'
        config.write_text(json.dumps({
            'metadata_server': 'P2PHANDSHAKE', 'protocol': 'tcp', 'device_name': '',
            'master_server_address': '127.0.0.1:%d' % rpc, 'global_segment_size': '256MB',
            'local_buffer_size': '64MB'}))
        for number, (name, seed) in enumerate(sorted(self.seeds.items())):
            port = free_port()
            kv = json.loads(json.dumps(KV))
            kv['kv_connector_extra_config']['lookup_rpc_port'] = number + 1
            env = dict(os.environ)
            for key in list(env):
                if key.startswith(('KVPOOL_SIM_', 'ASCEND_RT_', 'MOONCAKE_', 'PYTHONHASHSEED', 'VLLM_API_KEY')):
                    env.pop(key)
            env.update({'VLLM_HOST_IP': '127.0.0.1', 'PYTHONHASHSEED': seed, 'MC_STORE_CLIENT_SETUP_RETRIES': '1',
                        'MOONCAKE_CONFIG_PATH': str(config), 'VLLM_RPC_BASE_PATH': str(self.workdir)})
            env.update(self.extra_env)
            cmd = [self.python, str(VLLM), 'serve', str(model), '--served-model-name', SERVED, '--dtype', 'bfloat16',
                   '--max-model-len', '25600', '--host', '127.0.0.1', '--port', str(port),
                   '--max-num-batched-tokens', '4096', '--kv-transfer-config', json.dumps(kv)] + self.sim_args
            self.procs.append(subprocess.Popen(cmd, stdout=self._log(name), stderr=subprocess.STDOUT, env=env))
            self.instances[name] = 'http://127.0.0.1:%d' % port
        for name, url in self.instances.items():
            while not _healthy(url + '/health'):
                if time.monotonic() > deadline:
                    raise RuntimeError('%s not healthy:\n%s' % (name, self.text(name)[-3000:]))
                time.sleep(0.05)
        return self

    def text(self, name):
        for handle in self.logs:
            handle.flush()
        path = self.workdir / ('%s.log' % name)
        return path.read_text() if path.exists() else ''

    def stop(self):
        """SIGTERM to every instance at once (each one's graceful close takes seconds: one after the other they
        added up), then, once they have ended, to the master they unregister from, as before."""
        master, instances = self.procs[:1], self.procs[1:]
        for proc in instances:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(instances):
            _stop(proc, signalled=True)
        for proc in master:
            _stop(proc)
        for handle in self.logs:
            handle.close()
