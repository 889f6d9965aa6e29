"""The router scenario reuses the helpers of the instances scenario (molecule/instances/tests/instances_lib.py).

It also watches the cluster with a REAL Prometheus (the Debian package's binary, test equipment on the test
machine's loopback): a session fixture writes the targets, rules and prometheus.yml with monitoring.yml (role
kvpool_monitoring) and starts Prometheus before the first test, so that it scrapes the cluster through every drill
of test_router.py and the benchmark; test_seen_by_prometheus.py (collected after it) then reads what it saw.
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'instances' / 'tests'))

import instances_lib as lib  # noqa: E402

VARS = lib.SCENARIO.parent / 'router' / 'vars' / 'router.yml'
PROMETHEUS_URL = 'http://127.0.0.1:19090'


@pytest.fixture(scope='session', autouse=True)
def prometheus(tmp_path_factory):
    """A Prometheus on 127.0.0.1:19090 over what monitoring.yml wrote (scrape and rule evaluation every second);
    yields its work directory. Stopped at the end; its log is printed when it fails to start."""
    binary = shutil.which('prometheus') or '/usr/bin/prometheus'
    assert os.path.exists(binary), 'no prometheus binary: make promtool installs Debian\'s prometheus package'
    work = tmp_path_factory.mktemp('prometheus')
    run = lib.playbook('monitoring.yml', var_files=(lib.SIM_VARS, VARS), extra_vars={
        'kvpool_monitoring_file_sd_dir': str(work / 'file_sd'), 'kvpool_monitoring_rules_dir': str(work / 'rules'),
        'kvpool_monitoring_prometheus_config': True,
        'kvpool_monitoring_prometheus_config_path': str(work / 'prometheus.yml'),
        'kvpool_monitoring_prometheus_scrape_interval': '1s',
        'kvpool_monitoring_prometheus_evaluation_interval': '1s'})
    assert run.rc == 0, run.stdout[-3000:]
    log = (work / 'prometheus.log').open('w')
    proc = subprocess.Popen([binary, '--config.file=%s' % (work / 'prometheus.yml'),
                             '--storage.tsdb.path=%s' % (work / 'data'), '--web.listen-address=127.0.0.1:19090'],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while lib.http(PROMETHEUS_URL + '/-/ready', timeout=2)[0] != 200:
        assert proc.poll() is None and time.monotonic() < deadline, (work / 'prometheus.log').read_text()[-3000:]
        time.sleep(0.2)
    print('prometheus: ready at %s, scraping what monitoring.yml wrote in %s' % (PROMETHEUS_URL, work))
    try:
        yield work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
