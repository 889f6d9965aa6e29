"""Rolling upgrades through the router (upgrade.yml, docs/upgrades.md) on the SIMULATED two-node cluster, under a
steady load from the benchmark's own streaming client through the REAL vllm-router 0.1.17 (8 clients, one request
after the other each). The instances are vllm stand-ins: a "release" is the rendered settings for the declared
vllm-ascend version plus the version the stand-in reports (KVPOOL_SIM_VLLM_VERSION: SIMULATED, what a new image
would report). The Mooncake pool (master and store clients) is real.

Collected after test_router.py and test_seen_by_prometheus.py: the drills leave the instances on v0.23.0.

Each drill prints its figures: requests sent and failed, the time per batch (from the router's /workers: the worker
left out, then back), and the TTFT p50 / p90 through the router before, during each batch (all of it then served by
the other node: the others' TTFT) and after.
"""

import json
import sys
import threading
from pathlib import Path

import instances_lib as lib

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as testlib  # noqa: E402

VARS = lib.SCENARIO.parent / 'router' / 'vars' / 'router.yml'
ROUTER = 'http://172.31.250.11:30000'
WORKERS = {'node1': 'http://172.31.250.11:8002', 'node2': 'http://172.31.250.12:8002'}
# The stand-in reports the declared release (KVPOOL_SIM_VLLM_VERSION from it: inventories/sim, vars/router.yml).
OLD = {'vllm_instance_vllm_ascend_version': 'v0.22.1rc1'}
NEW = {'vllm_instance_vllm_ascend_version': 'v0.23.0'}


def play(name, *args, **kw):
    return lib.playbook(name, *args, var_files=(lib.SIM_VARS, VARS), **kw)


def versions():
    out = {}
    for node, url in WORKERS.items():
        status, body = lib.http(url + '/version', timeout=2)
        out[node] = json.loads(body)['version'] if status == 200 else None
    return out


def listed():
    status, body = lib.http(ROUTER + '/workers', timeout=2)
    if status != 200:
        return None
    return set(w['url'] for w in json.loads(body)['workers'] if w.get('is_healthy'))


class Batches(object):
    """Watches the router's /workers (0.1 s polls): marks on ``load`` when a worker leaves ('out <node>') and when
    it is back ('back <node>')."""

    def __init__(self, load):
        self.load, self._stop = load, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        seen = listed() or set()
        while not self._stop.is_set():
            now = listed()
            if now is not None:
                for node, url in WORKERS.items():
                    if url in seen and url not in now and 'out ' + node not in self.load.marks:
                        self.load.mark('out ' + node)
                    if url not in seen and url in now and 'out ' + node in self.load.marks:
                        self.load.mark('back ' + node)
                seen = now
            self._stop.wait(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)


def settle(load, count):
    """Wait until ``count`` more requests have finished (a window of figures, never a fixed sleep)."""
    goal = len(load.results) + count
    assert lib.wait_for(lambda: len(load.results) >= goal, 60), 'the load stalled'


def figures(load, nodes):
    rows = [('before', load.window('start', 'upgrade'))]
    for node in nodes:
        if 'out ' + node in load.marks:
            rows.append(('batch %s' % node, load.window('out ' + node, 'back ' + node if 'back ' + node in load.marks
                                                        else 'done')))
    rows.append(('after', load.window('done', 'end')))
    return rows


def report(title, load, nodes, run):
    batches = ', '.join('%s %.1f s' % (n, load.marks['back ' + n] - load.marks['out ' + n]) for n in nodes
                        if 'back ' + n in load.marks and 'out ' + n in load.marks)
    print('%s: playbook %.1f s (rc %d); requests sent %d, failed %d; time per batch (out of the router until back): '
          '%s' % (title, run.seconds, run.rc, len(load.results), len(load.failed()), batches or 'none'))
    for name, w in figures(load, nodes):
        print('  %-12s sent %4d failed %3d  TTFT p50 %s ms  p90 %s ms' % (name, w['sent'], w['failed'], w['p50'],
                                                                          w['p90']))
    for r in load.failed()[:10]:
        print('  failed request %.1f s after the start: %s' % (r[0] - load.marks['start'], r[3]))


def upgrade_under_load(title, extra):
    with testlib.SteadyLoad(ROUTER, concurrency=8) as load, Batches(load):
        settle(load, 40)
        load.mark('upgrade')
        run = play('upgrade.yml', extra_vars=extra)
        load.mark('done')
        settle(load, 40)
    report(title, load, list(WORKERS), run)
    return run, load


def test_rolling_upgrade_v022_to_v023_fails_no_request():
    # From the guide's release (converge deployed the default; put the old release in place first).
    first = play('upgrade.yml', extra_vars=OLD)
    assert first.rc == 0, first.stdout[-4000:]
    assert versions() == {'node1': '0.22.1+sim', 'node2': '0.22.1+sim'}
    run, load = upgrade_under_load('rolling upgrade v0.22.1rc1 -> v0.23.0', NEW)
    assert run.rc == 0, run.stdout[-6000:]
    assert load.failed() == [], load.failed()[:5]
    assert versions() == {'node1': '0.23.0+sim', 'node2': '0.23.0+sim'}
    assert listed() == set(WORKERS.values())
    for node in WORKERS:  # both batches went out of the router and came back, one after the other
        assert 'out ' + node in load.marks and 'back ' + node in load.marks, load.marks
    assert load.marks['back node1'] <= load.marks['out node2']
    assert run.stdout.count('sha256 match') >= 2, run.stdout[-4000:]  # the pool probe of each batch
    again = play('upgrade.yml', extra_vars=NEW)
    assert again.rc == 0 and set(again.changed().values()) == {0}, again.changed_tasks()


def test_upgrade_check_mode_shows_the_plan_and_changes_nothing():
    run = play('upgrade.yml', check=True, extra_vars=OLD)
    assert run.rc == 0, run.stdout[-4000:]
    testlib.assert_names(run.stdout, 'batch', 'vllm-8002', 'drain')
    assert versions() == {'node1': '0.23.0+sim', 'node2': '0.23.0+sim'}
    assert listed() == set(WORKERS.values())


def test_a_batch_that_does_not_recover_stops_the_rollout():
    bad = dict(NEW, vllm_instance_kv_connector='NoSuchConnector')
    pids = lib.instance_pids('node2')
    run, load = upgrade_under_load('rolling upgrade with a batch that fails its gate', bad)
    assert run.rc != 0
    testlib.assert_names(' '.join(run.stdout.split()), 'vllm-8002', 'NoSuchConnector')
    recap = run.recap()
    assert recap['node1']['failed'] >= 1, recap
    assert lib.instance_pids('node2') == pids  # the rollout stopped before node2's batch
    # node2 was never drained and still serves the release it had; node1 is out of the router
    assert versions()['node2'] == '0.23.0+sim'
    assert listed() == {WORKERS['node2']}
    assert load.failed() == [], load.failed()[:5]
    # Roll back: the same playbook with the old values
    back = play('upgrade.yml', extra_vars=NEW)
    assert back.rc == 0, back.stdout[-4000:]
    assert listed() == set(WORKERS.values())


def test_what_a_restart_of_one_instance_costs_the_other_with_and_without_the_drain():
    """Issue 34 item 3, measured: node1's instance restarted under the steady load, (a) as a plain restart of its
    unit (the router only learns from its health checks and retries), (b) by rolling_restart.yml limited to node1
    (drained from the router first, put back after its gate). Printed: failed requests and the TTFT p50 / p90
    through the router (served by node2 while node1 is out) before, during and after."""
    rows = []
    for how in ('plain restart', 'drained restart'):
        with testlib.SteadyLoad(ROUTER, concurrency=8, prefix='restart %s' % how) as load, Batches(load):
            settle(load, 40)
            load.mark('upgrade')
            if how == 'plain restart':
                rc, out = lib.sh(lib.NODES['node1'], 'systemctl restart kvpool-vllm-vllm-8002')
                assert rc == 0, out
                assert lib.wait_for(lambda: lib.models(WORKERS['node1']) == ['qwen'], 60), 'node1 did not come back'
                assert lib.wait_for(lambda: listed() == set(WORKERS.values()), 60), 'the router did not take it back'
            else:
                run = play('rolling_restart.yml', '--limit', 'node1')
                assert run.rc == 0, run.stdout[-4000:]
            load.mark('done')
            settle(load, 40)
        during = load.window('upgrade', 'done')
        rows.append((how, load.window('start', 'upgrade'), during, load.window('done', 'end'), len(load.failed())))
        for r in load.failed()[:5]:
            print('  %s: failed request %.1f s after the start: %s' % (how, r[0] - load.marks['start'], r[3]))
    print('a restart of node1\'s instance under 8 clients through the router (TTFT p50 / p90 ms; sent / failed):')
    for how, before, during, after, failed in rows:
        print('  %-16s before %s / %s (%d)  during %s / %s (%d sent, %d failed)  after %s / %s (%d)  failed in all %d'
              % (how, before['p50'], before['p90'], before['sent'], during['p50'], during['p90'], during['sent'],
                 during['failed'], after['p50'], after['p90'], after['sent'], failed))
    assert rows[1][4] == 0, 'the drained restart failed requests'


def test_a_change_of_the_master_or_of_mooncake_json_is_refused_before_anything_changes():
    pids = dict((n, lib.instance_pids(n)) for n in WORKERS)
    run = play('upgrade.yml', extra_vars=dict(NEW, mooncake_master_client_ttl=30,
                                              mooncake_config_global_segment_size='2GB'))
    assert run.rc != 0
    text = ' '.join(run.stdout.split())
    testlib.assert_names(text, 'the master on node1', 'mooncake.json on node1', 'mooncake.json on node2',
                         'site.yml -i <inventory> --tags master,mooncake_config,instances')
    assert dict((n, lib.instance_pids(n)) for n in WORKERS) == pids and listed() == set(WORKERS.values())
    rc, out = lib.sh(lib.NODES['node1'], 'grep -c client_ttl /etc/systemd/system/kvpool-mooncake-master.service')
    assert out.strip() == '0', out  # the master's unit was not written


def test_preflight_names_the_release_change_and_the_cold_pool():
    """The version chain (pre-flight check 'upgrade') reads the release each instance runs (GET /version): declaring
    another one is a warning that the pool will be cold, on every node, before anything changes."""
    run = play('preflight.yml', extra_vars=OLD)
    assert run.rc == 0, run.stdout[-4000:]
    text = ' '.join(run.stdout.split())
    for node in WORKERS:
        testlib.assert_names(text, 'WARNING %s upgrade' % node, 'runs vLLM 0.23.0', 'downgrade',
                             'the pool will be cold', 'upgrade.yml')
