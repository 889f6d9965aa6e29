"""site.yml on the SIMULATED two-node cluster: what an operator checks, and how each failure shows.

Runs after converge (one instance on NPUs 0-3, port 8002, on each node, sharing the pool of the master on node1).
Every test runs the operator's playbooks (site.yml, rolling_restart.yml, teardown.yml) with the one setting
changed on the command line, and heals the cluster with a plain run when it broke it. The vllm on the nodes is
the stand-in of tests/mock/vllm (SIMULATED: no model, no NPU; the Mooncake pool traffic is real).
"""

import json
import sys
import time
from pathlib import Path

import pytest

import instances_lib as lib
from conftest import site

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as testlib  # noqa: E402

ENDPOINT = dict((n, 'http://%s:8002' % a) for n, a in lib.ADDRESS.items())
FAIL_PORT = 8099
TWO = [{'devices': [0, 1, 2, 3], 'port': 8002}, {'devices': [4, 5, 6, 7], 'port': 8003}]
FIND_OURS = ('ls -d /etc/ascend-kvpool /var/lib/ascend-kvpool 2>/dev/null; '
             'ps -eo args | grep -E "vllm serve|mooncake_master" | grep -v grep')


def test_both_nodes_serve_the_model_behind_the_health_gate(deployed):
    for node, endpoint in ENDPOINT.items():
        assert lib.http(endpoint + '/health')[0] == 200
        assert lib.models(endpoint) == ['qwen']
        status = deployed.status(node, 'vllm-8002')
        assert status['health'] == 'healthy' and status['endpoint'] == endpoint and status['devices_text'] == '0-3'
    assert deployed.report['ok'] and deployed.report['healthy'] == 2
    # One summary at the end: every instance's endpoint and health.
    summary = deployed.stdout[deployed.stdout.rindex('TASK [ascend.kvpool.vllm_instance : Show the summary]'):]
    summary = ' '.join(summary.split())  # the yaml callback wraps long lines
    testlib.assert_names(summary, '2 instance(s) on 2 node(s)', '2 healthy')
    assert 'node1 vllm-8002 http://172.31.250.11:8002 healthy' in summary
    assert 'node2 vllm-8002 http://172.31.250.12:8002 healthy' in summary


def test_phases_run_in_order(deployed):
    order = ['Plan the vLLM instances', 'Verify the NPU RoCE network', 'Run the vllm-ascend container',
             'Install Mooncake', 'Run the Mooncake master', 'Write mooncake.json on every node',
             'Run the vLLM-Ascend instances']
    positions = [deployed.stdout.index('PLAY [%s' % p) for p in order]
    assert positions == sorted(positions)


def test_rendered_for_the_declared_release(deployed):
    rec = lib.unit_record('node1', 'vllm-8002')
    argv = rec['argv']
    assert argv[1:3] == ['serve', '/root/.cache/Qwen2.5-72B-Instruct']
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags['--served-model-name'] == 'qwen' and flags['--tensor-parallel-size'] == '4'
    assert flags['--host'] == '172.31.250.11' and flags['--port'] == '8002'
    assert flags['--max-model-len'] == '25600' and flags['--max-num-batched-tokens'] == '4096'
    # v0.23.0 (the default release): the new connector name and port key, no register_buffer, the A2 direct transfer.
    assert json.loads(flags['--kv-transfer-config']) == {
        'kv_connector': 'AscendStoreConnector', 'kv_role': 'kv_both',
        'kv_connector_extra_config': {'use_layerwise': False, 'load_async': True, 'lookup_rpc_port': 0}}
    assert rec['env'] == {'MOONCAKE_CONFIG_PATH': '/etc/ascend-kvpool/mooncake.json', 'PYTHONHASHSEED': '0',
                          'VLLM_HOST_IP': '172.31.250.11', 'ASCEND_RT_VISIBLE_DEVICES': '0,1,2,3',
                          'HCCL_INTRA_ROCE_ENABLE': '1',
                          'KVPOOL_SIM_VLLM_VERSION': '0.23.0'}   # SIMULATED: inventories/sim, the declared release
    rc, environ = lib.sh(lib.NODES['node1'], 'tr "\\0" "\\n" < /proc/%d/environ' % rec['pid'])
    assert ('LD_LIBRARY_PATH=/usr/local/Ascend/ascend-toolkit/latest/python/site-packages/mooncake:'
            '/usr/local/Ascend/ascend-toolkit/latest/python/site-packages') in environ
    # the stand-in answers GET /version with the declared release's vLLM, which the pre-flight's check upgrade reads
    assert json.loads(lib.http(ENDPOINT['node1'] + '/version')[1])['version'] == '0.23.0+sim'


def test_the_pool_is_shared_across_nodes(deployed):
    prompt = 'cross node %f ' % time.time() + ' '.join('word%d' % i for i in range(700))
    hits = 'vllm:external_prefix_cache_hits_total'
    before = lib.metric(ENDPOINT['node2'], hits)
    request = {'model': 'qwen', 'prompt': prompt, 'max_tokens': 2}
    status, body = lib.http(ENDPOINT['node1'] + '/v1/completions', request)
    assert status == 200, body
    assert lib.puts_settled(ENDPOINT['node1'])  # node1's sending thread has put the prompt's blocks
    status, body = lib.http(ENDPOINT['node2'] + '/v1/completions', request)
    assert status == 200, body
    # node2 never saw the prompt: its prefix came from node1's KV blocks in the Mooncake pool.
    assert lib.metric(ENDPOINT['node2'], hits) - before >= 512


def test_second_run_changes_nothing_and_check_mode_is_clean(deployed):
    again = site()
    assert again.rc == 0 and set(again.changed().values()) == {0}, again.changed_tasks()
    checked = site(check=True)
    assert checked.rc == 0 and set(checked.changed().values()) == {0}, checked.changed_tasks()
    assert [checked.status(n, 'vllm-8002')['health'] for n in ENDPOINT] == ['healthy', 'healthy']


@pytest.mark.parametrize('case, args, needle', [
    ('missing MOONCAKE_CONFIG_PATH', {}, "The environment variable 'MOONCAKE_CONFIG_PATH' is not set."),
    ('bad JSON', {'env': {'MOONCAKE_CONFIG_PATH': '/tmp/kvpool-bad.json'}}, 'JSONDecodeError'),
    ('unknown connector', {'kv_transfer_config': {'kv_connector': 'NoSuchConnector', 'kv_role': 'kv_both'}},
     'Unsupported connector type: NoSuchConnector'),
    ('TP vs visible devices', {'env': {'ASCEND_RT_VISIBLE_DEVICES': '0,1'}}, 'Set visible device failed'),
])
def test_start_time_failures_surface_with_the_log_tail(deployed, case, args, needle):
    lib.sh(lib.NODES['node1'], 'printf "{\\"protocol\\": " > /tmp/kvpool-bad.json')
    params = {'name': 'failtest', 'model': '/root/.cache/Qwen2.5-72B-Instruct', 'served_model_name': 'qwen',
              'host': '172.31.250.11', 'port': FAIL_PORT, 'tensor_parallel_size': 4, 'ready_timeout': 60,
              'kv_transfer_config': {'kv_connector': 'AscendStoreConnector', 'kv_role': 'kv_both'},
              'env': {'MOONCAKE_CONFIG_PATH': '/etc/ascend-kvpool/mooncake.json', 'PYTHONHASHSEED': '0'}}
    if 'env' in args:
        params['env'] = dict(params['env'], **args['env'])
    elif not args:
        params['env'] = {'PYTHONHASHSEED': '0'}
    if 'kv_transfer_config' in args:
        params['kv_transfer_config'] = args['kv_transfer_config']
    res = lib.module('node1', 'ascend.kvpool.vllm_server', params)
    assert res.get('failed'), (case, res)
    # Drill (c), a crash loop: systemd restarts the unit until its rate limit, then the task names the unit and
    # shows the journal tail.
    testlib.assert_names(res['msg'], 'exited after its start', 'Last lines of `journalctl', 'kvpool-vllm-failtest')
    assert 'kvpool-vllm-failtest.service' in res['msg'], res['msg']
    assert needle in res['msg'] and needle in res['log_tail'], res['msg']
    assert res['state'] == 'stopped' and lib.http('http://172.31.250.11:%d/health' % FAIL_PORT)[0] is None
    rc, out = lib.sh(lib.NODES['node1'], 'systemctl show -p NRestarts -p ActiveState -p Result kvpool-vllm-failtest')
    print('drill c (%s): %s' % (case, ' '.join(out.split())))
    assert 'ActiveState=failed' in out
    lib.module('node1', 'ascend.kvpool.vllm_server', {'name': 'failtest', 'state': 'stopped'})


def test_a_failing_instance_fails_the_run_with_the_summary_and_log_tail(deployed, heal):
    run = site('--tags', 'instances', extra_vars={'vllm_instance_kv_connector': 'NoSuchConnector'})
    assert run.rc != 0
    testlib.assert_names(' '.join(run.stdout.split()), '2 instance(s) on 2 node(s)', '0 healthy', '2 problem(s)')
    for node in ENDPOINT:
        status = run.status(node, 'vllm-8002')
        assert status['failed'] and 'Unsupported connector type: NoSuchConnector' in status['error']
        testlib.assert_names(status['error'], 'Last lines of `journalctl', 'kvpool-vllm-vllm-8002')
    recap = run.recap()
    assert recap['node1']['failed'] == 1 and recap['node2']['failed'] == 1


@pytest.mark.parametrize('extra, needles', [
    ({'vllm_instance_register_buffer': True},
     ['node1: instance vllm-8002: register_buffer: true', 'ignored by vllm-ascend v0.23.0']),
    ({'vllm_instance_kv_connector': 'MooncakeConnectorStoreV1'},
     ['kv_connector MooncakeConnectorStoreV1 is deprecated in vllm-ascend v0.23.0']),
    ({'vllm_instance_vllm_ascend_version': 'v0.25.1rc1'},
     ['node1: vllm-ascend v0.25.1rc1 is a preview', 'vllm-ascend #14757']),
])
def test_settings_the_declared_release_ignores_are_warned_about(deployed, extra, needles):
    run = site('--tags', 'instances', check=True, extra_vars=extra)
    assert run.rc == 0, run.stdout[-4000:]
    text = '\n'.join(run.warnings())
    for needle in needles:
        assert needle in text, run.warnings()


def test_v011_renders_the_guide_verbatim_and_newer_releases_drop_the_stale_settings(deployed):
    old = site('--tags', 'instances', '--diff', check=True, extra_vars={'vllm_instance_vllm_ascend_version': 'v0.11.0'})
    assert old.rc == 0
    # The diff is of the unit file, whose ExecStart= words are quoted for systemd (a JSON word's quotes as \",
    # the --kv-transfer-config JSON compact).
    text = old.stdout.replace('\\"', '"').replace('": ', '":')
    assert '"kv_connector":"MooncakeConnectorStoreV1"' in text and '"mooncake_rpc_port":0' in text, text[-4000:]
    assert '"register_buffer":true' in text
    # The deployed default is v0.23.0: the guide's v0.22.1rc1 (declared) renders its buffer pool instead.
    guide = {'vllm_instance_vllm_ascend_version': 'v0.22.1rc1'}
    new = site('--tags', 'instances', '--diff', check=True, extra_vars=guide)
    assert new.rc == 0
    assert '+Environment="ASCEND_BUFFER_POOL=4:8"' in new.stdout, new.stdout[-4000:]
    assert '-Environment="HCCL_INTRA_ROCE_ENABLE=1"' in new.stdout, new.stdout[-4000:]
    assert set(new.changed().values()) == {1}  # would restart each node's instance; check mode changed nothing
    assert lib.models(ENDPOINT['node1']) == ['qwen']


# The parts of each message a user relies on (the host, the instance, the variable and value, the fix), each
# looked for on its own: rewording the sentence around them does not break the test, dropping one does.
@pytest.mark.parametrize('extra, needles', [
    ({'vllm_instance_instances': [{'devices': [0, 1, 2, 3], 'port': 8002}, {'devices': [4, 5, 6, 7], 'port': 8002}]},
     ['node1: ', 'port 8002 is used by both', 'instance vllm-8002']),
    ({'vllm_instance_instances': [{'devices': [0, 1, 2, 3], 'port': 8002}, {'devices': [3, 4], 'port': 8003}]},
     ['node1: ', 'NPU 3 is given to both', 'instance vllm-8002', 'instance vllm-8003']),
    ({'vllm_instance_instances': [{'devices': [0, 1], 'port': 8002, 'lookup_rpc_port': 7},
                                  {'devices': [2, 3], 'port': 8003, 'lookup_rpc_port': 7}]},
     ['node1: ', 'lookup_rpc_port 7 is used by both']),
    ({'vllm_instance_instances': [{'devices': [0, 1], 'port': 8002, 'tensor_parallel_size': 4}]},
     ['node1: instance vllm-8002', 'tensor_parallel_size 4', '2 NPU(s) [0, 1]', 'give as many NPUs']),
    ({'vllm_instance_python_hash_seed': "{{ '1' if inventory_hostname == 'node2' else '0' }}"},
     ['PYTHONHASHSEED differs between the instances of the play', 'node1/vllm-8002=0', 'node2/vllm-8002=1']),
])
def test_collisions_fail_before_anything_starts(deployed, extra, needles):
    run = site(extra_vars=extra)
    assert run.rc != 0, run.stdout[-3000:]
    missing = [needle for needle in needles if needle not in run.stdout]
    assert not missing, (missing, run.stdout[-3000:])
    assert set(run.changed().values()) == {0}
    assert 'PLAY [Verify the NPU RoCE network' not in run.stdout  # failed in the plan, before every phase


def test_two_instances_per_node_start_together(deployed, heal):
    one = site(extra_vars={'vllm_instance_instances': [{'devices': [0, 1, 2, 3], 'port': 8002}]})
    pids = lib.instance_pids('node1')
    # 2 x TP 4 x (1 GiB + 1 GiB) = 16 GiB of pool on a 24 GiB test machine: no extra reserve in the memory check.
    two = {'vllm_instance_instances': TWO, 'mooncake_config_memory_reserve_gib': 0}
    run = site(extra_vars=two)
    assert run.rc == 0, run.stdout[-4000:]
    assert run.report['healthy'] == 4
    for node, address in lib.ADDRESS.items():
        assert lib.models('http://%s:8003' % address) == ['qwen']
        assert run.status(node, 'vllm-8002')['action'] == 'none'   # the first instance was left alone
        assert run.status(node, 'vllm-8003')['action'] == 'started'
    assert lib.instance_pids('node1')['vllm-8002'] == pids['vllm-8002']
    assert '"lookup_rpc_port":1' in lib.unit_record('node1', 'vllm-8003')['argv'][-1].replace(' ', '')
    again = site(extra_vars=two)
    assert set(again.changed().values()) == {0}, again.changed_tasks()
    # Restarted together, two instances of one host never start in the same second (vllm_instance_start_stagger,
    # default 1 s: vllm-ascend #8938, ports taken by a neighbour starting at the same moment).
    restarted = site('--tags', 'instances', extra_vars=dict(two, vllm_instance_state='restarted'))
    assert restarted.rc == 0, restarted.stdout[-4000:]
    started = []
    for unit in ('kvpool-vllm-vllm-8002', 'kvpool-vllm-vllm-8003'):
        rc, out = lib.sh(lib.NODES['node1'], 'systemctl show -p ActiveEnterTimestampMonotonic --value %s' % unit)
        started.append(int(out.strip()) / 1e6)
    print('two instances restarted on node1: started %.2f s apart (vllm_instance_start_stagger 1)'
          % abs(started[1] - started[0]))
    assert abs(started[1] - started[0]) >= 1.0, started
    pids = lib.instance_pids('node1')
    # Back to one instance: the unlisted one is stopped, the other left alone.
    back = site()
    assert back.rc == 0 and lib.http('http://172.31.250.11:8003/health')[0] is None
    assert lib.instance_pids('node1') == {'vllm-8002': pids['vllm-8002']}
    assert one.rc == 0


def test_killed_instance_comes_back_by_itself_and_a_rerun_changes_nothing(deployed):
    """Drill (a), instance: kill -9 of its main process; systemd restarts it, healthy again within 15 s without
    Ansible; the next site.yml changes nothing."""
    pids = dict((n, lib.instance_pids(n)['vllm-8002']) for n in ENDPOINT)
    killed = time.monotonic()
    lib.sh(lib.NODES['node2'], 'kill -9 %d' % pids['node2'])
    back = None
    while time.monotonic() - killed < 30:
        now = lib.instance_pids('node2').get('vllm-8002')
        if now not in (None, pids['node2']) and lib.models(ENDPOINT['node2']) == ['qwen']:
            back = time.monotonic() - killed
            break
        time.sleep(0.2)
    print('drill a (instance): kill -9 of pid %d -> healthy again after %s s without Ansible (bound 15 s)'
          % (pids['node2'], '%.1f' % back if back is not None else 'more than 30'))
    assert back is not None and back < 15
    run = site()
    assert run.rc == 0 and run.changed() == {'node1': 0, 'node2': 0}, run.changed_tasks()
    assert lib.instance_pids('node1')['vllm-8002'] == pids['node1']
    assert lib.models(ENDPOINT['node2']) == ['qwen']


def test_rolling_restart_goes_node_by_node_behind_the_health_gate(deployed):
    pids = dict((n, lib.instance_pids(n)['vllm-8002']) for n in ENDPOINT)
    run = lib.playbook('rolling_restart.yml')
    assert run.rc == 0, run.stdout[-4000:]
    for node in ENDPOINT:
        assert lib.instance_pids(node)['vllm-8002'] != pids[node]
        assert lib.models(ENDPOINT[node]) == ['qwen']
    # serial 1: node1's batch (restart and health gate) completes before node2's starts.
    gates = [b.split('\nTASK [')[0] for b in run.stdout.split('TASK [ascend.kvpool.vllm_instance : Wait')[1:]]
    gates = [b for b in gates if 'ok: [' in b]  # the gate's runs (the plan play's check-mode launch skips it)
    assert [('[node1]' in b, '[node2]' in b) for b in gates] == [(True, False), (False, True)], gates
    assert 'health' in run.stdout and run.report is not None
    # rolling_restart.yml is upgrade.yml restarting every instance; without a router it says what that costs.
    testlib.assert_names(' '.join(run.stdout.split()), 'no router', 'while they restart will fail')


def test_teardown_leaves_the_nodes_as_they_were():
    """Last: teardown, snapshot, site.yml, teardown again: the nodes are as before (next scenarios start clean)."""
    snapshot = 'find /etc /var/lib /root /opt -xdev -newer /proc/1 -type f 2>/dev/null | sort; ' + FIND_OURS
    first = lib.teardown()
    assert first.rc == 0, first.stdout[-4000:]
    before = dict((n, lib.sh(c, snapshot)[1]) for n, c in lib.NODES.items())
    assert 'ascend-kvpool' not in ''.join(before.values())
    assert site().rc == 0
    run = lib.teardown()
    assert run.rc == 0, run.stdout[-4000:]
    after = dict((n, lib.sh(c, snapshot)[1]) for n, c in lib.NODES.items())
    assert after == before
    for endpoint in ENDPOINT.values():
        assert lib.http(endpoint + '/health')[0] is None
    assert lib.http('http://172.31.250.11:9003/health')[0] is None   # the master is stopped too


def test_teardown_needs_a_confirmation():
    run = lib.playbook('teardown.yml')
    assert run.rc != 0 and 'kvpool_teardown_confirm=true' in run.stdout
