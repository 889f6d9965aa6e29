"""The Mooncake KV pool on the SIMULATED two-node cluster: what an operator checks, and how each failure shows.

Runs after converge (master on node1, mooncake.json on both nodes, a probe object put on node1 and read on
node2, Mooncake installed from a wheel into /opt/kvpool-mooncake). The pool lives on a second network: each node's
mooncake_config_node_address (host_vars/node*.yml) is its SIMULATED data-plane address 172.31.251.<10+k> (mockctl
data-network up, converge.yml), not its ansible_host 172.31.250.<10+k> (issue 39). Each failure test runs the
scenario's own playbook (molecule/mooncake/converge.yml) the way an operator would, with the one setting changed on
the command line, and then heals the pool with a plain run so the next test starts from a healthy cluster.
"""

import json
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as lib  # noqa: E402

CONVERGE = 'molecule/mooncake/converge.yml'
NODES = {'node1': 'kvpool-node1', 'node2': 'kvpool-node2'}
# Where the pool lives (host_vars/node*.yml: SIMULATED data plane) and where Ansible reaches the nodes (ansible_host).
DATA = {'node1': '172.31.251.11', 'node2': '172.31.251.12'}
MANAGEMENT = {'node1': '172.31.250.11', 'node2': '172.31.250.12'}
MASTER = '172.31.251.11:50088'                  # node1's data-plane address


def sh(node, script):
    res = lib.docker_exec(NODES[node], 'sh', '-c', script)
    return res.returncode, res.stdout


UNIT = 'kvpool-mooncake-master.service'


def master_pid():
    """The main pid of the master's systemd unit (None when it does not run)."""
    rc, out = sh('node1', 'systemctl show -p MainPID --value %s' % UNIT)
    assert rc == 0, out
    return int(out.strip() or 0) or None


def master_cmdline():
    rc, out = sh('node1', 'tr "\\0" " " < /proc/%d/cmdline' % master_pid())
    assert rc == 0, out
    return out


def health():
    rc, out = sh('node1', 'curl -s -o /dev/null -w "%{http_code}" http://172.31.250.11:9003/health')
    return out.strip()


def converge(check=False, **extra):
    return lib.playbook(CONVERGE, extra_vars=extra, check=check)


@pytest.fixture(scope='module', autouse=True)
def healthy_at_the_end():
    yield
    run = converge()
    assert run.rc == 0, run.stdout


def real_master():
    """(pid, argv) of the real master binary: the child of the unit's main process, which is the wheel's Python
    wrapper (bin/mooncake_master) up to Mooncake 0.3.12.post1."""
    rc, out = sh('node1', 'for c in $(pgrep -P %d); do printf "%%s " $c; tr "\\0" " " < /proc/$c/cmdline; echo; done'
                 % master_pid())
    [line] = [ln for ln in out.splitlines() if '/site-packages/mooncake/mooncake_master' in ln]
    pid, dummy, argv = line.partition(' ')
    return int(pid), argv


def test_master_is_healthy_on_node1_only():
    assert health() == '200'
    # Mooncake 0.3.11.post1 declared and run (vars/mock.yml): --port (its --rpc_port comes from 0.3.12 on in the
    # collection's table), no --metrics_host (0.3.13+), accepted by the real binary.
    assert '--port=50088' in master_cmdline() and '--eviction_high_watermark_ratio=0.95' in master_cmdline()
    assert '--rpc_port=' not in master_cmdline() and '--metrics_host' not in master_cmdline()
    rc, out = sh('node1', 'curl -s http://172.31.250.11:9003/metrics')
    assert rc == 0 and 'master_' in out                      # Prometheus metrics of the real master
    # The RPC server listens on the node's data-plane address only; the metrics server of 0.3.11.post1 on every
    # address (the release has no --metrics_host), which the run warns about.
    assert '--rpc_address=172.31.251.11' in master_cmdline(), master_cmdline()
    rc, out = sh('node1', 'curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:9003/health')
    assert out.strip() == '200'
    run = converge(check=True)
    assert run.rc == 0, run.stdout[-3000:]
    text = ' '.join(run.stdout.split())  # Ansible wraps a long warning
    lib.assert_names(text, 'Mooncake 0.3.11.post1', 'no --metrics_host', 'listens on every address')
    # The task names the real master's pid, not the wrapper's (the unit's main pid).
    pid, argv = real_master()
    assert '--port=50088' in argv and pid != master_pid()
    lib.assert_names(text, 'mooncake_master running', '(pid %d)' % pid)
    rc = sh('node2', 'test -e /etc/systemd/system/%s' % UNIT)[0]
    assert rc != 0
    # The unit: enabled at boot, restarted on failure with a bounded rate, after the network, logging to the journal.
    rc, out = sh('node1', 'systemctl is-enabled %s && cat /etc/systemd/system/%s' % (UNIT, UNIT))
    assert rc == 0 and out.startswith('enabled'), out
    for line in ('Restart=on-failure', 'StartLimitBurst=5', 'After=network-online.target', 'StandardOutput=journal'):
        assert line in out.splitlines(), line
    rc, out = sh('node1', 'journalctl -u kvpool-mooncake-master -n 50 --no-pager -o cat')
    assert rc == 0 and 'master' in out.lower(), out


@pytest.mark.parametrize('node', ['node1', 'node2'])
def test_mooncake_json_on_every_node(node):
    rc, out = sh(node, 'stat -c %a /etc/ascend-kvpool/mooncake.json && cat /etc/ascend-kvpool/mooncake.json')
    assert rc == 0, out
    mode, dummy, text = out.partition('\n')
    assert mode == '644'
    assert json.loads(text) == {
        'metadata_server': 'P2PHANDSHAKE',
        'protocol': 'tcp',
        'device_name': '',
        'master_server_address': MASTER,          # node1's mooncake_config_node_address, not its ansible_host
        'global_segment_size': 1073741824,        # "1GB" rendered as bytes
        'local_buffer_size': 1073741824,
    }                                             # no local_hostname: no release reads it (VLLM_HOST_IP is the address)


def test_probe_reads_node1s_object_on_node2_and_changes_nothing():
    run = converge()
    assert run.rc == 0, run.stdout
    assert re.search(r'put on node1: 1048576 bytes in [0-9.]+ ms \([0-9.]+ MB/s\)', run.stdout), run.stdout
    assert re.search(r'node1 -> node2: 1048576 bytes in [0-9.]+ ms \([0-9.]+ MB/s\), sha256 match', run.stdout)
    assert all(r['changed'] == 0 and r['failed'] == 0 for r in run.recap().values()), run.recap()
    # The writer's holder is gone and the object with it; the record that the pool was proven lies next to
    # mooncake.json.
    deadline = time.monotonic() + 35
    while True:
        rc, out = sh('node1', 'ls /var/lib/ascend-kvpool/probe/ 2>/dev/null; pgrep -f KVPOOL_PROBE_RESUL[T] || true')
        rc, reader = sh('node2', 'pgrep -f KVPOOL_PROBE_RESUL[T] || true')
        if (not out.strip() and not reader.strip()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert out.strip() == '', out
    assert sh('node1', 'cat /etc/ascend-kvpool/mooncake.json.proven')[0] == 0
    assert reader.strip() == '', reader                         # the reader's client is gone too


def mounted_segments(since):
    """The segments the real master mounted since ``since`` (node1's epoch seconds), from its own log line
    ``action=mount_segment, segment_name=<address>:<port>`` (Mooncake 0.3.11.post1, master_service.cpp)."""
    rc, out = sh('node1', 'journalctl -u %s --since @%d --no-pager -o cat' % (UNIT, since))
    assert rc == 0, out
    return re.findall(r'action=mount_segment,\s*segment_name=([^\s,]+)', out)


def test_the_pool_registers_at_the_data_plane_addresses_not_at_ansible_host():
    """Issue 39, end to end: a node whose data-plane address (mooncake_config_node_address) differs from its
    ansible_host registers its segment there. Each node writes the probe's object in turn (the writer's segment
    holds it) and the other reads it across the data-plane network; the master's log names every segment it
    mounted, and none is on a management address."""
    for node in NODES:  # the SIMULATED mock: both addresses on the node (mockctl data-network up)
        rc, out = sh(node, 'ip -o -4 addr show')
        assert rc == 0 and DATA[node] + '/' in out and MANAGEMENT[node] + '/' in out, (
            '%s should have its data-plane address %s (mockctl data-network up, run by converge.yml) beside its '
            'management address %s; it has:\n%s' % (node, DATA[node], MANAGEMENT[node], out))
        rc, out = sh(node, 'cat /etc/ascend-kvpool/mooncake.json')
        assert json.loads(out)['master_server_address'] == MASTER, (
            '%s: mooncake.json points the master at %s, expected node1\'s data-plane address %s'
            % (node, json.loads(out).get('master_server_address'), MASTER))
    rc, out = sh('node1', 'ss -Hltn')
    local = [line.split()[3] for line in out.splitlines() if len(line.split()) > 3]
    listening = [address for address in local if address.endswith(':50088')]
    assert listening == [MASTER], (
        'the master should listen for RPC on node1\'s data-plane address %s only; it listens on %s'
        % (MASTER, ', '.join(listening) or 'nothing'))
    rc, out = sh('node1', 'date +%s')
    since = int(out.strip()) - 1
    try:
        for writer, reader in (('node1', 'node2'), ('node2', 'node1')):
            run = converge(mooncake_config_probe_writer=writer)
            assert run.rc == 0, run.stdout[-4000:]
            assert re.search(r'%s -> %s: 1048576 bytes in [0-9.]+ ms \([0-9.]+ MB/s\), sha256 match'
                             % (writer, reader), run.stdout), run.stdout[-4000:]
    finally:  # the probe's record on node2 (it wrote once); node1's is rewritten by the plain runs
        sh('node2', 'rm -f /etc/ascend-kvpool/mooncake.json.proven')
    segments = mounted_segments(since)
    hosts = sorted(set(s.rpartition(':')[0] for s in segments))
    where = 'the master mounted %s since the probes (its journal, action=mount_segment)' % (
        ', '.join(segments) or 'no segment')
    for node in NODES:
        assert DATA[node] in hosts, '%s wrote the probe\'s object but its segment is not at its data-plane ' \
            'address %s: %s' % (node, DATA[node], where)
        assert MANAGEMENT[node] not in hosts, '%s registered a segment at its management address %s ' \
            '(ansible_host), not at its data-plane address %s: %s' % (node, MANAGEMENT[node], DATA[node], where)
    assert set(hosts) <= set(DATA.values()), 'a segment outside the data-plane addresses %s: %s' % (
        ', '.join(sorted(DATA.values())), where)


def test_wheel_install_imports_from_its_virtualenv():
    for node in NODES:
        rc, out = sh(node, '/opt/kvpool-mooncake/bin/python -c "import mooncake.store, importlib.metadata as m; '
                           'print(m.version(\'mooncake-transfer-engine-non-cuda\'))"')
        assert rc == 0 and out.strip() == '0.3.11.post1', out


def test_killed_master_comes_back_by_itself_and_a_rerun_changes_nothing():
    """Drill (a): kill -9 of the real master (the pid the task names; the child of the wheel's wrapper on
    0.3.11.post1); the wrapper exits with it and systemd restarts the unit, healthy again within 15 s with no Ansible
    run; the next run changes nothing and the probe passes against the restarted master."""
    old = master_pid()
    real, dummy = real_master()
    killed = time.monotonic()
    sh('node1', 'kill -9 %d' % real)
    back = None
    while time.monotonic() - killed < 30:
        if master_pid() not in (None, old) and health() == '200':
            back = time.monotonic() - killed
            break
        time.sleep(0.2)
    print('drill a (master): kill -9 of pid %d -> healthy again after %s s without Ansible (bound 15 s)'
          % (old, '%.1f' % back if back is not None else 'more than 30'))
    assert back is not None and back < 15
    run = converge()
    assert run.rc == 0, run.stdout
    assert run.recap()['node1']['changed'] == 0 and run.recap()['node2']['changed'] == 0, run.recap()
    assert 'sha256 match' in run.stdout                     # the probe ran against the restarted master


def test_changed_eviction_ratio_restarts_the_master_with_a_diff():
    old = master_pid()
    run = lib.playbook(CONVERGE, '--diff', extra_vars={'mooncake_master_eviction_ratio': 0.1})
    assert run.rc == 0, run.stdout
    assert '-    "--eviction_ratio=0.05"' in run.stdout and '+    "--eviction_ratio=0.1"' in run.stdout
    assert 'restarted: settings changed' in run.stdout
    assert master_pid() != old and '--eviction_ratio=0.1' in master_cmdline() and health() == '200'
    again = converge(mooncake_master_eviction_ratio=0.1)
    assert again.recap()['node1']['changed'] == 0, again.recap()
    back = converge()
    assert back.rc == 0 and '--eviction_ratio=0.05' in master_cmdline()


def test_check_mode_shows_the_restart_and_changes_nothing():
    old = master_pid()
    run = converge(check=True, mooncake_master_eviction_ratio=0.2)
    assert run.rc == 0, run.stdout
    assert run.recap()['node1']['changed'] == 1
    assert master_pid() == old and '--eviction_ratio=0.05' in master_cmdline()


def test_oversized_segment_fails_naming_host_needed_and_available():
    run = converge(mooncake_config_global_segment_size='64GB')
    assert run.rc != 0
    m = re.search(r'node1: 1 instance\(s\) x TP 4 x \(global_segment_size 64 GiB \+ local_buffer_size 1 GiB\) '
                  r'\+ reserve 8 GiB needs 268\.0 GiB, but MemTotal is [0-9.]+ GiB\. Lower '
                  r'mooncake_config_global_segment_size', run.stdout)
    assert m, run.stdout
    # Nothing was written: the file still holds the 1 GiB segment.
    rc, out = sh('node2', 'cat /etc/ascend-kvpool/mooncake.json')
    assert json.loads(out)['global_segment_size'] == 1073741824


def test_size_that_is_not_whole_gib_is_rejected():
    run = converge(mooncake_config_local_buffer_size='1536MB')
    assert run.rc != 0
    lib.assert_names(run.stdout, 'mooncake_config_local_buffer_size', '"1536MB"', 'not a whole number of GiB')


def test_unreachable_master_fails_the_probe_naming_node_and_address():
    run = converge(mooncake_config_master_port=50099)
    assert run.rc != 0
    lib.assert_names(run.stdout, 'node1: cannot reach', 'Mooncake master', '172.31.251.11:50099')
    heal = converge()
    assert heal.rc == 0 and 'sha256 match' in heal.stdout


def test_wheel_install_stops_on_an_old_glibc_before_installing():
    """SIMULATED glibc 2.31 on node2 (mockctl fault glibc: ldd --version says so): the role names the node, the
    wheel, what it needs and what to do, and installs nothing (a fresh virtualenv stays without mooncake)."""
    lib.mockctl('fault', 'set', '--node', 'node2', '--npu', 'all', '--check', 'glibc', '--value', '2.31')
    try:
        run = converge(mooncake_install_virtualenv='/opt/kvpool-mooncake-glibc')
    finally:
        lib.mockctl('fault', 'clear', '--node', 'node2')
    text = ' '.join(run.stdout.split())
    assert run.rc != 0
    lib.assert_names(text, 'node2: mooncake', 'mooncake-transfer-engine-non-cuda', 'needs glibc 2.35 or later',
                     'glibc 2.31', 'Nothing was installed')
    lib.assert_names(text, 'node1: glibc 2.36', '(needs 2.35)')
    rc, out = sh('node2', '/opt/kvpool-mooncake-glibc/bin/python -c "import mooncake"')
    assert rc != 0, out
    sh('node1', 'rm -rf /opt/kvpool-mooncake-glibc')
    sh('node2', 'rm -rf /opt/kvpool-mooncake-glibc')
