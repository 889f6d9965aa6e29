"""The services keep running by themselves (docs/services.md), on the SIMULATED cluster whose nodes run systemd.

Drills, each printing its numbers: a node rebooted (`docker restart`) brings its services back, they pass their
health gates and the pool probe, and site.yml then changes nothing (b); --check and --diff are honest for every
transition (d); a node deployed by the layout before the units (detached process, pid file, settings.json) is
converted, and a recorded pid that is now another process is left alone and named (upgrade). Drills a and c are in
test_site.py (instance), molecule/mooncake (master) and test_container.py (container mode).
"""

import json
import subprocess
import time

import instances_lib as lib
from conftest import site

ENDPOINT = dict((n, 'http://%s:8002' % a) for n, a in lib.ADDRESS.items())
MASTER_UNIT = 'kvpool-mooncake-master'
MASTER_STATE = '/var/lib/ascend-kvpool/mooncake_master'


def unit_argv(node, unit):
    rc, out = lib.sh(lib.NODES[node], 'tr "\\0" "\\n" < /proc/$(systemctl show -p MainPID --value %s)/cmdline' % unit)
    assert rc == 0, out
    return out.splitlines()


def test_a_rebooted_node_brings_its_services_back(deployed):
    """Drill (b): docker restart of node2 (systemd halts and boots again): the enabled instance unit comes back and
    passes its health gate by itself, the pool probe passes, and site.yml then changes nothing."""
    started = time.monotonic()
    subprocess.run(['docker', 'restart', lib.NODES['node2']], check=True, stdout=subprocess.DEVNULL)
    back = None
    while time.monotonic() - started < 90:
        if lib.models(ENDPOINT['node2']) == ['qwen']:
            back = time.monotonic() - started
            break
        time.sleep(0.3)
    print('drill b: docker restart of node2 -> instance healthy again after %s s without Ansible'
          % ('%.1f' % back if back is not None else 'more than 90'))
    assert back is not None
    run = site(extra_vars={'kvpool_pool_probe': 'always'})
    assert run.rc == 0, run.stdout[-6000:]
    assert 'sha256 match' in run.stdout                                  # the pool probe passes across the nodes
    assert set(run.changed().values()) == {0}, run.changed_tasks()
    assert [run.status(n, 'vllm-8002')['health'] for n in ENDPOINT] == ['healthy', 'healthy']


def test_check_and_diff_are_honest_for_every_transition(deployed, heal):
    """Drill (d): new, changed setting, dead, removed from the list: --check --diff says what a run would do and
    changes nothing."""
    pids = dict((n, lib.instance_pids(n)['vllm-8002']) for n in ENDPOINT)
    two = {'vllm_instance_instances': [{'devices': [0, 1, 2, 3], 'port': 8002},
                                       {'devices': [4, 5, 6, 7], 'port': 8003}],
           'mooncake_config_memory_reserve_gib': 0}
    # new: a second instance per node
    new = site('--diff', check=True, extra_vars=two)
    assert new.rc == 0 and new.changed() == {'node1': 1, 'node2': 1}, new.changed_tasks()
    assert '+ExecStart=' in new.stdout and '"8003"' in new.stdout
    assert lib.http('http://172.31.250.11:8003/health')[0] is None
    # changed setting
    changed = site('--diff', check=True, extra_vars={'vllm_instance_max_model_len': 16384})
    assert changed.rc == 0 and changed.changed() == {'node1': 1, 'node2': 1}, changed.changed_tasks()
    assert '-    "25600"' in changed.stdout and '+    "16384"' in changed.stdout
    assert dict((n, lib.instance_pids(n)['vllm-8002']) for n in ENDPOINT) == pids
    # dead: stopped by hand on node2 (systemd does not restart a clean stop)
    lib.sh(lib.NODES['node2'], 'systemctl stop kvpool-vllm-vllm-8002')
    dead = site(check=True)
    assert dead.rc == 0 and dead.changed() == {'node1': 0, 'node2': 1}, dead.changed_tasks()
    assert dead.status('node2', 'vllm-8002')['action'] == 'started'
    assert lib.http(ENDPOINT['node2'] + '/health')[0] is None
    healed = site()
    assert healed.rc == 0 and healed.changed() == {'node1': 0, 'node2': 1}, healed.changed_tasks()
    # removed from the list: two instances deployed, then --check with one
    assert site(extra_vars=two).rc == 0
    removed = site('--diff', check=True)
    assert removed.rc == 0 and removed.changed() == {'node1': 1, 'node2': 1}, removed.changed_tasks()
    assert lib.models('http://172.31.250.11:8003') == ['qwen']
    print('drill d: --check changed counts new=%s changed=%s dead=%s removed=%s; nothing changed by them'
          % (new.changed(), changed.changed(), dead.changed(), removed.changed()))


def old_layout_master(argv):
    """Start the master the way the release before the units did: detached (setsid), pid file, settings.json."""
    script = ('set -e; systemctl disable --now --quiet %s; rm -f /etc/systemd/system/%s.service; '
              'systemctl daemon-reload; mkdir -p %s; cd /; t=$(date +%%s.%%N); '
              'setsid "$@" >%s/mooncake_master.log 2>&1 </dev/null & pid=$!; echo $pid >%s/mooncake_master.pid; '
              'echo "$pid $t"') % (MASTER_UNIT, MASTER_UNIT, MASTER_STATE, MASTER_STATE, MASTER_STATE)
    res = subprocess.run(['docker', 'exec', lib.NODES['node1'], 'sh', '-c', script, 'old-release'] + argv,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert res.returncode == 0, res.stdout
    pid, started_at = res.stdout.split()[-2:]
    settings = {'argv': argv, 'env': {}, 'fingerprint': 'old', 'pid': int(pid), 'started_at': float(started_at)}
    lib.sh(lib.NODES['node1'], "printf '%%s' '%s' > %s/settings.json" % (json.dumps(settings), MASTER_STATE))
    return int(pid)


def alive(node, pid):
    return lib.sh(lib.NODES[node], 'kill -0 %d' % pid)[0] == 0


def test_upgrade_from_the_old_layout_converts_to_the_unit(deployed, heal):
    """Step 4: a master of the old layout is stopped (start time and command line match) and replaced by its unit;
    --check first says so and changes nothing."""
    argv = unit_argv('node1', MASTER_UNIT)
    pid = old_layout_master(argv)
    checked = site('--diff', check=True, extra_vars={'kvpool_pool_probe': 'false'})
    assert checked.rc == 0, checked.stdout[-4000:]
    assert 'upgrade from the old layout (pid %d' % pid in checked.stdout and '# old layout:' in checked.stdout
    assert alive('node1', pid)
    run = site()
    assert run.rc == 0, run.stdout[-6000:]
    assert 'upgrade from the old layout (pid %d' % pid in run.stdout
    assert not alive('node1', pid)
    rc, out = lib.sh(lib.NODES['node1'], 'systemctl is-active %s; ls %s' % (MASTER_UNIT, MASTER_STATE))
    assert out.split()[0] == 'active' and 'mooncake_master.pid' not in out and 'settings.json' not in out, out
    again = site()
    assert set(again.changed().values()) == {0}, again.changed_tasks()
    print('upgrade: old master pid %d stopped, unit %s active, re-run changed nothing' % (pid, MASTER_UNIT))


def test_a_reused_pid_of_the_old_layout_is_left_alone_and_named(deployed):
    """The recorded pid is now another process (its command line differs): never signalled, named in the failure."""
    res = subprocess.run(['docker', 'exec', '-d', lib.NODES['node1'], 'setsid', 'sleep', '600'], check=False)
    assert res.returncode == 0
    rc, out = lib.sh(lib.NODES['node1'], 'pgrep -n -x sleep')
    other = int(out.strip())
    settings = {'argv': unit_argv('node1', MASTER_UNIT), 'pid': other, 'started_at': time.time()}
    lib.sh(lib.NODES['node1'], "printf '%%s' '%s' > %s/settings.json; echo %d > %s/mooncake_master.pid"
           % (json.dumps(settings), MASTER_STATE, other, MASTER_STATE))
    try:
        run = site('--tags', 'master')
        assert run.rc != 0
        assert 'the old layout records pid %d' % other in run.stdout and 'left alone' in run.stdout, run.stdout[-3000:]
        assert alive('node1', other)
    finally:
        lib.sh(lib.NODES['node1'], 'kill %d; rm -f %s/settings.json %s/mooncake_master.pid'
               % (other, MASTER_STATE, MASTER_STATE))
    print('upgrade: recorded pid %d runs another command line: left alone and named' % other)
