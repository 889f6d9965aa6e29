"""Helpers for the scenario tests: run the operator's playbooks and drive the SIMULATED mock cluster.

The tests call exactly what an operator types (`ansible-playbook verify_network.yml -i inventories/sim`)
and read what the operator reads (the summary on stdout, the JSON report). Faults are injected with
tests/mock/mockctl, the test equipment.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / 'inventories' / 'sim'
MOCKCTL = REPO / 'tests' / 'mock' / 'mockctl'
BIN = Path(sys.executable).parent

# The scenario tests check a message by its parts (what it names, the fix) with the unit tests' helper.
if str(REPO / 'tests' / 'unit') not in sys.path:
    sys.path.insert(0, str(REPO / 'tests' / 'unit'))
import messages  # noqa: E402

assert_names = messages.assert_names


class Run:
    def __init__(self, rc, stdout, report):
        self.rc = rc
        self.stdout = stdout
        self.report = report

    def recap(self):
        """{host: {ok, changed, unreachable, failed, ...}} from the PLAY RECAP."""
        out = {}
        for m in re.finditer(r'^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$', self.stdout, re.M):
            out[m.group(1)] = dict((k, int(v)) for k, v in re.findall(r'(\w+)=(\d+)', m.group(2)))
        return out

    def findings(self, **match):
        return [f for f in (self.report or {}).get('findings', [])
                if all(f.get(k) == v for k, v in match.items())]


def playbook(name='verify_network.yml', *args, extra_vars=None, report_name='npu_network.json', check=False):
    """Run a playbook of the repository root against the mock cluster; return a Run."""
    tmp = Path(tempfile.mkdtemp(prefix='kvpool-test-'))
    report = tmp / report_name
    ev = {'npu_network_report_path': str(report)}
    if check and (extra_vars or {}).get('npu_network_report_in_check_mode') is None:
        ev['npu_network_report_in_check_mode'] = True  # the tests read the report of a --check run too
    ev.update(extra_vars or {})
    argv = [str(BIN / 'ansible-playbook'), str(REPO / name), '-i', str(INVENTORY), '-e', json.dumps(ev)]
    if check:
        argv.append('--check')
    argv.extend(args)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1')
    proc = subprocess.run(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    data = json.loads(report.read_text()) if report.exists() else None
    return Run(proc.returncode, proc.stdout, data)


def mockctl(*args):
    proc = subprocess.run([sys.executable, str(MOCKCTL)] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError('mockctl %s failed:\n%s' % (' '.join(map(str, args)), proc.stdout))
    return proc.stdout


def node(name):
    """A testinfra host for a mock node, driven through Ansible itself (force_ansible) so that the inventory's
    templated connection settings (the SSH key path) apply exactly as in the playbooks."""
    import testinfra  # pytest-testinfra

    os.environ['ANSIBLE_CONFIG'] = str(REPO / 'ansible.cfg')
    return testinfra.get_host('ansible://%s?ansible_inventory=%s&force_ansible=true' % (name, INVENTORY))


def docker_exec(container, *argv):
    return subprocess.run(['docker', 'exec', container] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)


class SteadyLoad(object):
    """A steady load through one endpoint (the router's) with the benchmark's own streaming client (_loadgen, as
    benchmark.yml sends its requests): ``concurrency`` clients, each sending one chat request after the other on a
    kept-alive connection (``pause`` seconds after each answer), prompts sharing a prefix. Every request is recorded
    as (sent, ok, ttft_ms, error) on the controller's monotonic clock; ``mark(name)`` names a moment,
    ``window(a, b)`` summarises the requests sent between two marks (sent, failed, TTFT p50 / p90)."""

    def __init__(self, url, model='qwen', concurrency=8, max_tokens=2, api_key=None, prefix='steady load', pause=0.0):
        collections = str(REPO / '.collections')
        if collections not in sys.path:
            sys.path.insert(0, collections)
        from ansible_collections.ascend.kvpool.plugins.module_utils import _loadgen  # pylint: disable=import-outside-toplevel
        self._loadgen = _loadgen
        self.url, self.model, self.concurrency, self.max_tokens = url, model, concurrency, max_tokens
        self.api_key, self.prefix, self.pause = api_key, prefix, pause
        self.results, self.marks = [], {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client, args=(n,), daemon=True) for n in range(concurrency)]

    def _client(self, n):
        stream = self._loadgen._Stream(self.url, 60.0)  # pylint: disable=protected-access
        i = 0
        try:
            while not self._stop.is_set():
                sent = time.monotonic()
                body = self._loadgen.request_body('chat', self.model, '%s %d tail %d' % (self.prefix, n, i),
                                                  self.max_tokens)
                res = stream.send('/v1/chat/completions', body, 'chat', api_key=self.api_key)
                with self._lock:
                    self.results.append((sent, bool(res['ok']), res['ttft_ms'], res['error'] or ''))
                i += 1
                if self.pause:
                    self._stop.wait(self.pause)
        finally:
            stream.close()

    def mark(self, name):
        self.marks[name] = time.monotonic()
        return self.marks[name]

    def __enter__(self):
        self.mark('start')
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.mark('end')
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)

    def failed(self):
        return [r for r in self.results if not r[1]]

    def window(self, first='start', last='end'):
        """{'sent', 'failed', 'p50', 'p90'} (TTFT in ms) of the requests sent between two marks."""
        lo, hi = self.marks[first], self.marks.get(last, float('inf'))
        rows = [r for r in self.results if lo <= r[0] < hi]
        ttft = [r[2] for r in rows if r[1]]
        pct = self._loadgen.percentile
        return {'sent': len(rows), 'failed': len([r for r in rows if not r[1]]),
                'p50': round(pct(ttft, 50), 1) if ttft else None, 'p90': round(pct(ttft, 90), 1) if ttft else None}
