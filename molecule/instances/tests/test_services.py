"""The services keep running by themselves (docs/services.md), on the SIMULATED cluster whose nodes run systemd.

Drills, each printing its numbers: a node rebooted (`docker restart`) brings its services back, they pass their
health gates and the pool probe, and site.yml then changes nothing (b); --check and --diff are honest for every
transition (d). Drills a and c are in test_site.py (instance), molecule/mooncake (master) and test_container.py
(container mode).
"""

import subprocess
import time

import instances_lib as lib
from conftest import site

ENDPOINT = dict((n, 'http://%s:8002' % a) for n, a in lib.ADDRESS.items())
MASTER_UNIT = 'kvpool-mooncake-master'


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
