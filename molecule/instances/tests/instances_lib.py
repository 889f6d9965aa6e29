"""Helpers of the instances scenario: run the operator's playbooks, read the instance report, talk to the APIs.

Like molecule/resources/kvpool_testlib.py (the tests type what an operator types), plus the vLLM instance report
(vllm_instance_report_path) and the scenario's SIMULATED-cluster settings (vars/sim.yml) passed with -e.
"""

import json
import shlex
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCENARIO = Path(__file__).resolve().parents[1]
SIM_VARS = SCENARIO / 'vars' / 'sim.yml'
INVENTORY = REPO / 'inventories' / 'sim'
BIN = Path(sys.executable).parent
NODES = {'node1': 'kvpool-node1', 'node2': 'kvpool-node2'}
ADDRESS = {'node1': '172.31.250.11', 'node2': '172.31.250.12'}


class Run:
    def __init__(self, rc, stdout, report, seconds):
        self.rc = rc
        self.stdout = stdout
        self.report = report
        self.seconds = seconds

    def recap(self):
        """{host: {ok, changed, unreachable, failed, ...}} from the PLAY RECAP."""
        out = {}
        for m in re.finditer(r'^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$', self.stdout, re.M):
            out[m.group(1)] = dict((k, int(v)) for k, v in re.findall(r'(\w+)=(\d+)', m.group(2)))
        return out

    def changed(self):
        return dict((h, r['changed']) for h, r in self.recap().items())

    def changed_tasks(self):
        """'TASK name: changed line' for every changed result (for assertion messages)."""
        out, task = [], None
        for line in self.stdout.splitlines():
            if line.startswith('TASK ['):
                task = line.split('] ', 1)[-1].rstrip('* ').strip()
            elif line.startswith('changed:'):
                out.append('%s: %s' % (task, line))
        return out

    def status(self, node, name=None):
        rows = ((self.report or {}).get('status') or {}).get(node) or []
        return rows if name is None else next((r for r in rows if r['name'] == name), None)

    def warnings(self):
        return re.findall(r'^\[WARNING\]: (.*)$', self.stdout, re.M)


def playbook(name, *args, extra_vars=None, check=False, inventory=None, var_files=(SIM_VARS,), timeout=900, env=None,
             on_line=None):
    """Run a playbook of the repository (path relative to it) like an operator; return a Run.

    ``var_files`` are passed first (-e @file), then ``extra_vars``, so the test's own values win.
    ``on_line(line, proc)`` sees every output line as it is printed (to act in the middle of a run).
    """
    tmp = Path(tempfile.mkdtemp(prefix='kvpool-inst-'))
    report = tmp / 'vllm_instances.json'
    # The tests read the reports of their --check runs too, which an operator's --check does not write.
    ev = {'vllm_instance_report_path': str(report), 'npu_network_report_path': str(tmp / 'npu_network.json'),
          'vllm_instance_report_in_check_mode': True, 'npu_network_report_in_check_mode': True}
    ev.update(extra_vars or {})
    argv = [str(BIN / 'ansible-playbook'), str(REPO / name), '-i', str(inventory or INVENTORY)]
    for path in var_files:
        argv += ['-e', '@%s' % path]
    argv += ['-e', json.dumps(ev)]
    if check:
        argv.append('--check')
    argv.extend(args)
    full_env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0',
                    ANSIBLE_NOCOLOR='1')
    full_env.update(env or {})
    started = time.time()
    if on_line is None:
        proc = subprocess.run(argv, cwd=str(REPO), env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=timeout, check=False)
    else:
        proc = _streamed(argv, full_env, timeout, on_line)
    data = json.loads(report.read_text()) if report.exists() else None
    shutil.rmtree(str(tmp), ignore_errors=True)
    return Run(proc.returncode, proc.stdout, data, time.time() - started)


def _streamed(argv, env, timeout, on_line):
    """subprocess.run's result for a run whose lines go to ``on_line`` while it runs."""
    lines = []
    with subprocess.Popen(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True) as child:
        deadline = time.time() + timeout
        for line in child.stdout:
            lines.append(line)
            on_line(line, child)
            if time.time() > deadline:
                child.kill()
        rc = child.wait()
    return subprocess.CompletedProcess(argv, rc, ''.join(lines))


def teardown(**kw):
    ev = {'kvpool_teardown_confirm': True}
    ev.update(kw.pop('extra_vars', {}))
    return playbook('teardown.yml', extra_vars=ev, **kw)


def wait_for(predicate, timeout, interval=0.1):
    """Seconds until ``predicate()`` is true (polled every ``interval``), None after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(interval)
    return None


def sh(container, script, timeout=120):
    proc = subprocess.run(['docker', 'exec', container, 'sh', '-c', script], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


def http(url, data=None, timeout=10):
    """(status, body) of a GET (or a JSON POST) straight to a test container or the loopback (no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None,
                                 headers={'Content-Type': 'application/json'})
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode('utf-8', 'replace')
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode('utf-8', 'replace')
    except (urllib.error.URLError, OSError) as exc:
        return None, str(exc)


def models(endpoint):
    status, body = http(endpoint + '/v1/models')
    if status != 200:
        return None
    return [m['id'] for m in json.loads(body).get('data', [])]


def metric(endpoint, name):
    """Sum of a Prometheus counter over its label sets, from GET /metrics."""
    status, body = http(endpoint + '/metrics')
    assert status == 200, body
    total = 0.0
    for line in body.splitlines():
        if line.startswith(name + '{') or line.startswith(name + ' '):
            total += float(line.rsplit(' ', 1)[1])
    return total


def puts_settled(endpoint, timeout=30.0):
    """Wait until the instance has put every block it queued into the pool (SIMULATED gauge of the stand-in:
    kvpool_sim_pool_put_pending, see tests/mock/vllm/README.md). vllm-ascend puts from a sending thread after the
    prefill, so another node asked at once may find only part of the blocks. Returns whether it settled."""
    deadline = time.monotonic() + timeout
    while metric(endpoint, 'kvpool_sim_pool_put_pending') > 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def instance_pids(node):
    """{instance name: main pid} of the instance units the collection runs on a mock node (systemctl)."""
    rc, out = sh(NODES[node], 'for u in /etc/systemd/system/kvpool-vllm-*.service; do [ -f "$u" ] || continue; '
                              'n=$(basename "$u" .service); echo "${n#kvpool-vllm-} '
                              '$(systemctl show -p MainPID --value "$n")"; done')
    pids = {}
    for line in out.splitlines():
        name, pid = (line.split(' ', 1) + [''])[:2]
        if pid.strip().isdigit() and int(pid) > 0:
            pids[name] = int(pid)
    return pids


def unit_record(node, name):
    """argv (after the collection's PATH-prepending sh wrapper), env (Environment= lines) and main pid of an
    instance's systemd unit, read from its unit file as systemd reads it."""
    rc, text = sh(NODES[node], 'cat /etc/systemd/system/kvpool-vllm-%s.service' % name)
    assert rc == 0, text
    lines = text.splitlines()
    i = [n for n, line in enumerate(lines) if line.startswith('ExecStart=')][0]
    exec_text = lines[i][len('ExecStart='):]
    while exec_text.endswith('\\'):
        i += 1
        exec_text = exec_text[:-1] + ' ' + lines[i].strip()
    argv = [w.replace('%%', '%').replace('$$', '$') for w in shlex.split(exec_text)]
    if argv[:2] == ['/bin/sh', '-c'] and '--' in argv:
        argv = argv[argv.index('--') + 1:]
    env = {}
    for line in lines:
        if line.startswith('Environment='):
            key, value = shlex.split(line[len('Environment='):])[0].replace('%%', '%').split('=', 1)
            env[key] = value
    return {'argv': argv, 'env': env, 'pid': instance_pids(node).get(name), 'unit_text': text}


def module(node, name, args, check=False):
    """Run one module on a mock node (ad hoc, JSON callback); return its result dict."""
    argv = [str(BIN / 'ansible'), node, '-i', str(INVENTORY), '-m', name, '-a', json.dumps(args)]
    if check:
        argv.append('--check')
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'), ANSIBLE_LOAD_CALLBACK_PLUGINS='1',
               ANSIBLE_STDOUT_CALLBACK='ansible.posix.json')
    proc = subprocess.run(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=600, check=False)
    doc = json.loads(proc.stdout)
    return doc['plays'][0]['tasks'][0]['hosts'][node]
