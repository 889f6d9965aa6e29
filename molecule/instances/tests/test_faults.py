"""The fault matrix of site.yml on the SIMULATED two-node cluster: every pre-flight finding, and the ordinary
accidents of a running deployment (a dead instance, a dead master, a node lost mid-run, an interrupted run).

Faults are real where they can be (a process holding a port, a missing model, a node container killed, a run
interrupted with SIGINT like Ctrl-C); the NPU faults and the skewed clock are the mock nodes' SIMULATED ones
(`mockctl fault`, libfaketime). Each test heals the cluster with a plain site.yml run when it broke it.
"""

import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import instances_lib as lib

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as testlib  # noqa: E402

ENDPOINT = dict((n, 'http://%s:8002' % a) for n, a in lib.ADDRESS.items())
TWO = [{'devices': [0, 1, 2, 3], 'port': 8002}, {'devices': [4, 5, 6, 7], 'port': 8003}]
MODEL = '/root/.cache/Qwen2.5-72B-Instruct'
KEY = 'sk-kvpool-test-3f9c1d7e5a'


def site(*args, **kw):
    return lib.playbook('site.yml', *args, **kw)


def heal_site():
    run = site()
    assert run.rc == 0, run.stdout[-6000:]
    return run


@pytest.fixture(scope='module')
def deployed():
    return heal_site()


def master_pid():
    rc, out = lib.sh(lib.NODES['node1'], 'pgrep -x mooncake_master || pgrep -f "mooncake/mooncake_master"')
    return int(out.split()[0]) if rc == 0 and out.split() else None


def node_clock_offset(node):
    """The node's wall clock minus this machine's, as a process of a new SSH session there sees it (seconds)."""
    before = time.time()
    proc = subprocess.run(['ssh', '-i', str(lib.REPO / '.sim' / 'id_ed25519'), '-o', 'StrictHostKeyChecking=no',
                           '-o', 'UserKnownHostsFile=/dev/null', '-o', 'BatchMode=yes', '-o', 'LogLevel=ERROR',
                           '-o', 'ControlMaster=no', 'root@%s' % lib.ADDRESS[node],
                           'python3 -c "import time; print(time.time())"'],
                          stdout=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    return float(proc.stdout.strip() or 'nan') - (before + time.time()) / 2


def failure_text(run):
    """The run's output with the yaml callback's line wrapping undone."""
    return ' '.join(run.stdout.split())


def assert_stopped_in_preflight(run):
    assert run.rc != 0
    assert set(run.changed().values()) == {0}, run.changed_tasks()
    assert 'PLAY [Verify the NPU RoCE network' not in run.stdout   # stopped before every phase that changes things


@pytest.fixture
def node_faults():
    """Faults set on the mock nodes and things started on them, all cleared afterwards."""
    cleanups = []
    yield cleanups
    for cleanup in reversed(cleanups):
        cleanup()
    testlib.mockctl('fault', 'clear', '--node', 'all')


def test_preflight_names_every_finding_in_one_summary_before_anything_changes(deployed, node_faults):
    # node1: NPU driver not loaded (SIMULATED). node2: NPU 5 busy with another process, NPU 6 in Alarm (SIMULATED),
    # port 8003 held by a real process, clock 30 s ahead (SIMULATED with libfaketime), a larger model copy.
    testlib.mockctl('fault', 'set', '--node', 'node1', '--npu', 'all', '--check', 'driver', '--value', 'unloaded')
    testlib.mockctl('fault', 'set', '--node', 'node2', '--npu', '5', '--check', 'process', '--value', 'python3')
    testlib.mockctl('fault', 'set', '--node', 'node2', '--npu', '6', '--check', 'npu_health', '--value', 'Alarm')
    testlib.mockctl('fault', 'set', '--node', 'node2', '--npu', 'all', '--check', 'clock_offset_s', '--value', '30')
    lib.sh(lib.NODES['node2'], 'setsid python3 -m http.server 8003 >/dev/null 2>&1 & '
                               'dd if=/dev/zero of=%s/extra.safetensors bs=1k count=4 2>/dev/null' % MODEL)
    node_faults.append(lambda: lib.sh(lib.NODES['node2'], 'rm -f %s/extra.safetensors; pkill -f "http.server [8]003"'
                                      % MODEL))
    assert 25 < node_clock_offset('node2') < 35, 'test equipment: the SIMULATED clock skew did not take effect'
    # New SSH connections for this run: the SIMULATED skew reaches processes of sessions opened after `fault set`
    # (mockctl closes the open ones too; a fresh control path makes it certain for Ansible's ControlPersist).
    control_dir = tempfile.mkdtemp(prefix='kvpool-cp-')
    node_faults.append(lambda: shutil.rmtree(control_dir, ignore_errors=True))
    run = site(env={'ANSIBLE_SSH_CONTROL_PATH_DIR': control_dir}, extra_vars={
        'vllm_instance_instances': TWO,
        'mooncake_config_global_segment_size': '400GB',
        'preflight_container_enabled': True, 'preflight_container_image': 'quay.io/ascend/vllm-ascend:v0.23.0',
        'vllm_instance_environment': {'PYTHONHASHSEED': 'random'},
        'vllm_instance_register_buffer': True,
    })
    assert_stopped_in_preflight(run)
    text = failure_text(run)
    expected = [
        'ERROR node1 npu: NPU driver',
        'ERROR node2 npu: NPU 5 of instance vllm-8003 is busy: process',
        'ERROR node2 npu: NPU 6 of instance vllm-8003 is not healthy (Health Alarm)',
        'ERROR node1 memory: 2 instance(s) x TP 4 x (global_segment_size 400 GiB + local_buffer_size 1 GiB)',
        'ERROR node2 port: port 8003 (instance vllm-8003) is already held by pid',
        'python3 -m http.server 8003',
        'ERROR node1 model: model %s differs in size across nodes' % MODEL,
        'ERROR node2 container: container runtime docker is not installed',
        'ERROR node1 hash_seed: PYTHONHASHSEED of instance vllm-8002 is random',
        'ERROR node2 clock: clock is ',
        'WARNING node1 deprecated:',
    ]
    missing = [e for e in expected if e not in text]
    # The offset is measured over SSH (node clock minus the midpoint of the round trip, to 0.1 s): 30 s of
    # SIMULATED skew reads as 29.9 or 30.2 as well as 30.0.
    skew = re.search(r'ERROR node2 clock: clock is (\d+(?:\.\d+)?) s ahead of the other nodes', text)
    if not (skew and 28 < float(skew.group(1)) < 32):
        missing.append('ERROR node2 clock: clock is about 30 s ahead of the other nodes')
    if missing:   # the summary lines and the nodes' clocks as the module sees them now, for the failure message
        summary = [line for line in run.stdout.splitlines() if line.startswith(('ERROR ', 'WARNING '))]
        clocks = dict((n, lib.module(n, 'ascend.kvpool.preflight_facts', {'ports': [22]}).get('clock'))
                      for n in lib.NODES)
        pytest.fail('not in the summary: %s\nsummary:\n%s\nclocks now: %s' % (missing, '\n'.join(summary), clocks))
    assert 'ahead of the other nodes' in text and 'ERROR node1 clock' not in text
    assert text.count('Fix:') >= len(expected)


def test_preflight_names_a_missing_model_a_taken_master_port_and_an_unreachable_master(deployed, node_faults):
    lib.sh(lib.NODES['node1'], 'setsid python3 -m http.server 9004 >/dev/null 2>&1 &')
    node_faults.append(lambda: lib.sh(lib.NODES['node1'], 'pkill -f "http.server [9]004"'))
    run = site(extra_vars={'vllm_instance_model_path': '/root/.cache/no-such-model',
                           'mooncake_master_metrics_port': 9004,
                           'preflight_master_address': '127.0.0.1'})
    assert_stopped_in_preflight(run)
    text = failure_text(run)
    for needle in ['ERROR node1 model: model path /root/.cache/no-such-model does not exist',
                   'ERROR node2 model: model path /root/.cache/no-such-model does not exist',
                   'ERROR node1 port: port 9004 (Mooncake master metrics port) is already held by pid',
                   'WARNING node2 master: cannot reach the Mooncake master at 127.0.0.1:50088']:
        assert needle in text, (needle, text[-6000:])


def test_different_hash_seeds_across_nodes_fail_naming_the_node(deployed, tmp_path):
    inventory = tmp_path / 'inventory'
    (inventory / 'host_vars').mkdir(parents=True)
    (inventory / 'hosts.yml').write_text((lib.INVENTORY / 'hosts.yml').read_text())
    (inventory / 'group_vars').symlink_to(lib.INVENTORY / 'group_vars')
    (inventory / 'host_vars' / 'node2.yml').write_text('vllm_instance_python_hash_seed: "1"\n')
    run = site(inventory=inventory)
    assert_stopped_in_preflight(run)
    text = failure_text(run)
    assert 'PYTHONHASHSEED differs' in text and 'node2/vllm-8002=1' in text, text[-4000:]


def test_master_bound_to_loopback_is_caught_before_the_instances(deployed):
    """A real misconfiguration: the master listens on 127.0.0.1, so no other node can register with it."""
    pids = dict((n, lib.instance_pids(n)['vllm-8002']) for n in ENDPOINT)
    run = site(extra_vars={'mooncake_master_rpc_address': '127.0.0.1'})
    assert run.rc != 0
    text = failure_text(run)
    # The master's pre-flight refuses an RPC address other than the node's one data-plane address (where every
    # mooncake.json points the master), before the master is restarted.
    assert 'fatal: [node1]: FAILED!' in text, text[-6000:]
    testlib.assert_names(text, "mooncake_master_rpc_address is '127.0.0.1'", 'mooncake_config_node_address',
                         '172.31.250.11', 'remove mooncake_master_rpc_address')
    # node1 stops at its master's refusal (nothing of the master was changed); node2, which runs no master, goes on
    # against the master that still runs unchanged: no task of the instances' play runs on node1.
    instances_play = run.stdout.split('PLAY [Run the vLLM-Ascend instances', 1)[1:]
    assert not instances_play or '[node1]' not in instances_play[0].split('PLAY RECAP', 1)[0], run.stdout[-6000:]
    assert dict((n, lib.instance_pids(n)['vllm-8002']) for n in ENDPOINT) == pids   # instances left alone
    heal_site()


def test_killed_master_is_restored_and_the_pool_probe_passes_again(deployed):
    """systemd restarts a killed master by itself; site.yml then changes nothing and the probe passes against it."""
    old = master_pid()
    killed = time.monotonic()
    lib.sh(lib.NODES['node1'], 'kill -9 %d' % old)
    while time.monotonic() - killed < 30 and not (master_pid() not in (None, old)
                                                  and lib.http('http://172.31.250.11:9003/health')[0] == 200):
        time.sleep(0.2)
    assert master_pid() not in (None, old) and lib.http('http://172.31.250.11:9003/health')[0] == 200
    run = site(extra_vars={'kvpool_pool_probe': 'always'})
    assert run.rc == 0, run.stdout[-6000:]
    assert 'sha256 match' in run.stdout                      # the cross-node put/get probe ran against the new master
    assert set(run.changed().values()) == {0}, run.changed_tasks()


def test_a_failed_pool_probe_is_run_again_by_a_rerun_that_changes_nothing(deployed):
    """site.yml probes the pool when the master or a mooncake.json changed, and while the probe's record on its
    writer (node1) says the pool was not proven: a failed probe is not forgotten by the next run."""
    marker = '/etc/ascend-kvpool/mooncake.json.proven'
    assert lib.sh(lib.NODES['node1'], 'cat %s' % marker)[0] == 0               # the deployment proved the pool
    failed = site(extra_vars={'kvpool_pool_probe': 'always', 'mooncake_config_probe_python': '/nonexistent/python3'})
    assert failed.rc != 0, failed.stdout[-4000:]
    testlib.assert_names(failed.stdout, '/nonexistent/python3', 'not found')
    assert lib.sh(lib.NODES['node1'], 'test -e %s' % marker)[0] != 0          # the record is gone
    again = site()                                                              # master and mooncake.json unchanged
    assert again.rc == 0 and 'sha256 match' in again.stdout, again.stdout[-4000:]
    assert lib.sh(lib.NODES['node1'], 'test -e %s' % marker)[0] == 0
    quiet = site()
    assert quiet.rc == 0 and 'sha256 match' not in quiet.stdout, quiet.stdout[-4000:]
    assert quiet.recap()['node1']['changed'] == 0 and quiet.recap()['node2']['changed'] == 0, quiet.changed_tasks()


def test_node_lost_mid_run_fails_clearly_and_the_others_finish(deployed):
    """node2 dies (its container is killed) while the master phase runs; node1 still gets its killed instance back."""
    node1_pid = lib.instance_pids('node1')['vllm-8002']
    lib.sh(lib.NODES['node1'], 'kill -9 -%d' % node1_pid)
    fired = []

    def crash_node2(line, child):
        del child
        if not fired and line.startswith('PLAY [Run the Mooncake master'):
            fired.append(line)
            subprocess.run(['docker', 'kill', lib.NODES['node2']], capture_output=True, check=False)

    try:
        run = site(on_line=crash_node2)
        assert fired, run.stdout[-3000:]
        assert run.rc != 0
        recap = run.recap()
        assert recap['node2']['unreachable'] >= 1 and recap['node1']['unreachable'] == 0, recap
        assert 'UNREACHABLE!' in run.stdout and 'fatal: [node2]: UNREACHABLE!' in run.stdout
        assert lib.instance_pids('node1')['vllm-8002'] != node1_pid            # node1's own work was done
        assert lib.models(ENDPOINT['node1']) == ['qwen']
    finally:
        testlib.mockctl('up', '--nodes', '2')                                    # the node comes back (restarted)
    heal = heal_site()
    assert heal.recap()['node1']['changed'] == 0, heal.changed_tasks()        # node1 left alone
    assert lib.models(ENDPOINT['node2']) == ['qwen']


def test_run_interrupted_after_the_master_step_completes_on_rerun():
    assert lib.teardown().rc == 0
    fired = []

    def interrupt(line, child):
        if not fired and line.startswith('PLAY [Write mooncake.json on every node'):
            fired.append(line)
            child.send_signal(signal.SIGINT)                                     # Ctrl-C

    first = site(on_line=interrupt)
    assert fired and first.rc != 0, first.stdout[-3000:]
    assert lib.http(ENDPOINT['node1'] + '/health')[0] is None                    # no instance yet
    pid = master_pid()
    assert pid is not None
    heal_site()
    assert master_pid() == pid                                                   # the master is left alone
    for endpoint in ENDPOINT.values():
        assert lib.models(endpoint) == ['qwen']
    assert set(site().changed().values()) == {0}


def test_api_key_never_shows_in_output_process_listings_or_readable_files(deployed):
    run = site('-vvv', '--diff', extra_vars={'vllm_instance_api_key': KEY})
    assert run.rc == 0, run.stdout[-6000:]
    assert KEY not in run.stdout and KEY not in json.dumps(run.report)
    assert 'VLLM_API_KEY=<secret' in run.stdout                               # the diff names the key, not its value
    for node, endpoint in ENDPOINT.items():
        assert lib.http(endpoint + '/v1/models')[0] == 401                      # the key is required
        assert lib.http(endpoint + '/health')[0] == 200                         # health stays open, as in vLLM
        rc, seen = lib.sh(lib.NODES[node], "su nobody -s /bin/sh -c 'ps -eo args; cat /proc/[0-9]*/environ' "
                                           "2>/dev/null")
        assert 'vllm serve' in seen and KEY not in seen, node           # other users see the process, not the key
        rc, readable = lib.sh(lib.NODES[node], "find /etc/ascend-kvpool /var/lib/ascend-kvpool /etc/systemd/system "
                                               "-type f -perm /044 -exec grep -l '%s' {} + ; true" % KEY)
        assert readable.strip() == '', (node, readable)                 # no file others can read holds it
        rc, mode = lib.sh(lib.NODES[node], 'stat -c %a /etc/ascend-kvpool/secrets/kvpool-vllm-vllm-8002.env')
        assert mode.strip() == '600', mode                               # the unit's EnvironmentFile
    again = site('-vvv', extra_vars={'vllm_instance_api_key': KEY})
    assert set(again.changed().values()) == {0} and KEY not in again.stdout
    heal_site()
    assert lib.models(ENDPOINT['node1']) == ['qwen']                            # without the key again
