"""What a REAL Prometheus (Debian's 2.42, test equipment on loopback; conftest.py) saw of the SIMULATED two-node
cluster while test_router.py ran its drills and benchmark.yml (collected after it): targets written by
monitoring.yml, every recording rule, alert and dashboard query of role kvpool_monitoring evaluated, the dashboard
drawn from the data, and the master drill: a hung master fires KvpoolMasterDown, which clears once its unit has
restarted the killed process, and the restart itself fires KvpoolMasterRestarted.
"""

import json
import sys
import time
import urllib.parse

import instances_lib as lib
PROMETHEUS_URL = 'http://127.0.0.1:19090'  # where conftest.py starts it

sys.path.insert(0, str(lib.REPO / 'tools'))
import dashboard_png  # noqa: E402
import prom_eval  # noqa: E402

# The quantity each alert compares (its expression without the threshold): after the benchmark each must return
# data, while the alert itself returns none (nothing is wrong). KvpoolPoolHitRateCollapsed compares with the hour
# before (offset 10m): its own inputs exist only after 70 minutes, so its signal is the hit ratio of the last 5.
SIGNALS = {
    'KvpoolMasterDown': 'up{role="mooncake_master"}',
    'KvpoolMasterRestarted': 'resets(master_ping_requests_total[5m])',
    'KvpoolInstanceDown': 'up{role="vllm_instance"}',
    'KvpoolRouterDown': 'up{role="router"}',
    'KvpoolRouterAllTrafficOnOneWorker': 'kvpool_router:worker_share:rate5m',
    'KvpoolPoolNearlyFull': 'kvpool_master:pool_fill_ratio',
    'KvpoolEvictionStorm': 'increase(master_evicted_key_count[10m])',
    'KvpoolPoolHitRateCollapsed': 'kvpool_cluster:vllm_external_prefix_cache_hit_ratio:rate5m',
    'KvpoolPutFailuresRising': 'kvpool_master:put_failures:rate5m / (kvpool_master:put_requests:rate5m > 0)',
    'KvpoolGetFailuresRising': 'kvpool_master:get_failures:rate5m / (kvpool_master:get_requests:rate5m > 0)',
    'KvpoolClientsDropped': 'master_active_clients',
    # The OpLog gauges: a master of 0.3.13 exports them at 0 with OpLog off too (the scenario's).
    'KvpoolMasterStandbyLagging': 'ha_oplog_standby_lag',
    'KvpoolMasterStandbyFailed': 'ha_standby_state',
    'KvpoolMasterStandbyNotWatching': 'ha_standby_state',
    'KvpoolMasterOplogWritesPending': 'ha_pending_mutation_queue_size',
}
MASTER_UNIT = 'kvpool-mooncake-master'


def query(expr):
    status, body = lib.http(PROMETHEUS_URL + '/api/v1/query?' + urllib.parse.urlencode({'query': expr}))
    assert status == 200, (expr, status, body[:500])
    data = json.loads(body)
    assert data['status'] == 'success', (expr, body[:500])
    return data['data']['result']


def alerts(name=None):
    status, body = lib.http(PROMETHEUS_URL + '/api/v1/alerts')
    assert status == 200, body
    found = json.loads(body)['data']['alerts']
    return [a for a in found if name is None or a['labels']['alertname'] == name]


def wait_for(predicate, timeout):
    """Seconds (one decimal, for the drill's figures) until ``predicate()`` is true, None after ``timeout``."""
    seconds = lib.wait_for(predicate, timeout, 0.2)
    return None if seconds is None else round(seconds, 1)


def test_every_master_instance_and_router_is_a_target_up_with_its_labels():
    status, body = lib.http(PROMETHEUS_URL + '/api/v1/targets')
    assert status == 200, body
    active = json.loads(body)['data']['activeTargets']
    seen = sorted((t['labels']['role'], t['labels']['instance'], t['scrapeUrl'], t['health']) for t in active)
    print('prometheus targets: %s' % seen)
    assert seen == [
        ('mooncake_master', 'node1/mooncake-master', 'http://172.31.250.11:9003/metrics', 'up'),
        ('router', 'node1/router', 'http://172.31.250.11:29000/metrics', 'up'),
        ('vllm_instance', 'node1/vllm-8002', 'http://172.31.250.11:8002/metrics', 'up'),
        ('vllm_instance', 'node2/vllm-8002', 'http://172.31.250.12:8002/metrics', 'up')]
    assert {t['labels']['cluster'] for t in active} == {'kvpool'}


def test_every_rule_and_panel_returns_data_after_the_benchmark_and_no_alert_is_active():
    """Each recording rule (its expression and its recorded series) and each dashboard query returns at least one
    series; each alert's signal does too, while no alert is pending or firing on the healthy cluster."""
    results = {}
    for label, expr in prom_eval.expressions():
        if label.startswith('alert'):
            name = label.split()[-1]
            results['alert  ' + name] = len(query(expr))
            results['signal ' + name] = len(query(SIGNALS[name]))
        else:
            results[label] = len(query(expr))
    for label, count in sorted(results.items()):
        print('%3d  %s' % (count, label))
    alert_names = {label.split()[-1] for label in results if label.startswith('alert')}
    assert alert_names == set(SIGNALS)
    empty = sorted(label for label, count in results.items() if count == 0 and not label.startswith('alert'))
    assert empty == []
    active = [(a['labels']['alertname'], a['labels'].get('instance'), a['state']) for a in alerts()]
    assert active == []
    assert all(count == 0 for label, count in results.items() if label.startswith('alert'))


def test_the_dashboard_drawn_from_the_run_has_data_in_every_panel(tmp_path):
    out = tmp_path / 'kvpool-dashboard.png'
    counts, failed = dashboard_png.render(PROMETHEUS_URL, out, minutes=8,
                                          label='SIMULATED mock cluster (vllm stand-ins, real Mooncake pool, real '
                                                'vllm-router), molecule scenario router')
    print('dashboard: %s (%d bytes): %s' % (out, out.stat().st_size, counts))
    assert failed == []
    assert sorted(title for title, n in counts.items() if n == 0) == []


def test_a_hung_then_killed_master_fires_master_down_which_clears_once_its_unit_restarted_it():
    """The master stops answering (SIGSTOP: a hung process, every scrape fails): KvpoolMasterDown goes pending.
    Then SIGKILL: systemd restarts it (Restart=always) and the alert clears; the restart fires
    KvpoolMasterRestarted (its counters start again from zero)."""
    node1 = lib.NODES['node1']
    rc, pid = lib.sh(node1, 'systemctl show -p MainPID --value %s' % MASTER_UNIT)
    assert rc == 0 and int(pid) > 0, pid
    pid = int(pid)
    assert lib.sh(node1, 'kill -STOP %d' % pid)[0] == 0
    try:
        pending = wait_for(lambda: any(a['state'] in ('pending', 'firing') for a in alerts('KvpoolMasterDown')), 30)
    finally:
        killed = time.monotonic()
        assert lib.sh(node1, 'kill -KILL %d' % pid)[0] == 0
    assert pending is not None, 'KvpoolMasterDown not pending 30 s after the master hung: %s' % alerts()

    def new_process():
        rc, out = lib.sh(node1, 'systemctl show -p MainPID --value %s' % MASTER_UNIT)
        return rc == 0 and out.strip().isdigit() and out.strip() not in ('0', str(pid))
    new_pid = wait_for(new_process, 30)
    assert new_pid is not None, lib.sh(node1, 'systemctl status %s --no-pager' % MASTER_UNIT)[1]
    cleared = wait_for(lambda: not alerts('KvpoolMasterDown'), 30)
    cleared_at = round(time.monotonic() - killed, 1)
    restarted = wait_for(lambda: any(a['state'] == 'firing' for a in alerts('KvpoolMasterRestarted')), 30)
    print('master drill: hung (SIGSTOP) -> KvpoolMasterDown pending after %s s; SIGKILL -> new process after %s s, '
          'KvpoolMasterDown cleared %s s after the kill, KvpoolMasterRestarted firing %s s after that'
          % (pending, new_pid, cleared_at, restarted))
    assert cleared is not None, alerts()
    assert restarted is not None, alerts()
    nrestarts = lib.sh(node1, 'systemctl show -p NRestarts --value %s' % MASTER_UNIT)[1].strip()
    assert int(nrestarts) >= 1
