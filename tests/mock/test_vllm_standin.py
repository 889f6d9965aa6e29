"""Tests of the SIMULATED `vllm` stand-in (tests/mock/vllm): command line, start-time failures, HTTP surface,
and the KV pool behaviour against a REAL `mooncake_master` on loopback.

The stand-in must run under a Python that can `import mooncake.store` (PyPI mooncake-transfer-engine-non-cuda,
as on the mock nodes). Found from, in order: $KVPOOL_TEST_MOONCAKE_PYTHON, the interpreter of the
`mooncake_master` entry script, this interpreter, /usr/bin/python3. `mooncake_master` from
$KVPOOL_TEST_MOONCAKE_MASTER or PATH. Tests that need them are skipped, with the reason, when absent; the
command-line tests run everywhere.
"""

import concurrent.futures
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
VLLM = HERE / "vllm" / "vllm"
MODEL_NAME = "Qwen2.5-72B-Instruct"
SERVED = "qwen"
KV_NEW = {"kv_connector": "AscendStoreConnector", "kv_role": "kv_both",
          "kv_connector_extra_config": {"use_layerwise": False, "load_async": True}}
# the seed guide's config (old connector name, deprecated mooncake_rpc_port)
KV_GUIDE = {"kv_connector": "MooncakeConnectorStoreV1", "kv_role": "kv_both",
            "kv_connector_extra_config": {"use_layerwise": False, "mooncake_rpc_port": "0", "load_async": True,
                                          "register_buffer": True}}


# --- discovery -------------------------------------------------------------------------------------------
def _imports_mooncake(python):
    try:
        return subprocess.run([python, "-c", "from mooncake.store import MooncakeDistributedStore"],
                              capture_output=True, check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _find_master():
    path = os.environ.get("KVPOOL_TEST_MOONCAKE_MASTER") or shutil.which("mooncake_master")
    return path if path and os.access(path, os.X_OK) else None


def _find_python(master):
    candidates = [os.environ.get("KVPOOL_TEST_MOONCAKE_PYTHON")]
    if master:
        try:
            with open(master, "rb") as handle:
                first = handle.readline().decode("utf-8", "replace")
            if first.startswith("#!") and "python" in first:
                candidates.append(first[2:].strip().split()[0])
        except OSError:
            pass
    candidates += [sys.executable, "/usr/bin/python3"]
    for python in candidates:
        if python and os.path.exists(python) and _imports_mooncake(python):
            return python
    return None


@pytest.fixture(scope="module")
def master_bin():
    path = _find_master()
    if path is None and os.environ.get("KVPOOL_TEST_MOONCAKE_MASTER"):
        pytest.fail("KVPOOL_TEST_MOONCAKE_MASTER=%s is not an executable" % os.environ["KVPOOL_TEST_MOONCAKE_MASTER"])
    if path is None:
        pytest.skip("mooncake_master not found: set KVPOOL_TEST_MOONCAKE_MASTER or put it on PATH "
                    "(pip install mooncake-transfer-engine-non-cuda==0.3.13.post1)")
    return path


@pytest.fixture(scope="module")
def mc_python(master_bin):
    wanted = os.environ.get("KVPOOL_TEST_MOONCAKE_PYTHON")
    python = _find_python(master_bin)
    if wanted and python != wanted:
        pytest.fail("KVPOOL_TEST_MOONCAKE_PYTHON=%s does not import mooncake.store" % wanted)
    if python is None:
        pytest.skip("no Python that imports mooncake.store: set KVPOOL_TEST_MOONCAKE_PYTHON")
    version = os.environ.get("KVPOOL_TEST_MOONCAKE_VERSION")
    if version:  # the release under test (make mooncake-matrix: 0.3.11.post1, the vllm-ascend images')
        out = subprocess.run([python, "-c", "import importlib.metadata as m; "
                              "print(m.version('mooncake-transfer-engine-non-cuda'))"],
                             capture_output=True, text=True, timeout=30, check=False).stdout.strip()
        assert out == version, (python, out)
    return python


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / MODEL_NAME
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2", "max_position_embeddings": 32768}))
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("standin")


@pytest.fixture(scope="module")
def master(master_bin, workdir):
    rpc, metrics = free_port(), free_port()
    log = open(workdir / "master.log", "w")
    proc = subprocess.Popen([master_bin, "--rpc_port", str(rpc), "--rpc_address", "127.0.0.1",
                             "--metrics_port", str(metrics), "--eviction_high_watermark_ratio", "0.95",
                             "--eviction_ratio", "0.05"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # the wheel's wrapper (up to 0.3.12.post1) has the master as child

    def stop(sig):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail("mooncake_master exited: " + (workdir / "master.log").read_text()[-2000:])
        if listening(rpc):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % metrics, timeout=1).read()
                break
            except (OSError, urllib.error.URLError):
                pass
        time.sleep(0.1)
    else:
        stop(signal.SIGKILL)
        proc.wait()
        pytest.fail("mooncake_master did not become ready")
    yield "127.0.0.1:%d" % rpc
    stop(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        stop(signal.SIGKILL)
        proc.wait()
    log.close()


def mooncake_json(workdir, master_address, name="mooncake.json"):
    path = workdir / name
    path.write_text(json.dumps({
        "metadata_server": "P2PHANDSHAKE", "protocol": "tcp", "device_name": "",
        "master_server_address": master_address, "global_segment_size": "128MB", "local_buffer_size": "32MB",
    }))
    return path


def base_env(**extra):
    env = dict(os.environ)
    for key in list(env):
        if key.startswith(("KVPOOL_SIM_", "ASCEND_RT_", "MOONCAKE_")) or key in ("PYTHONHASHSEED", "VLLM_API_KEY"):
            env.pop(key)
    env.update({"VLLM_HOST_IP": "127.0.0.1", "PYTHONHASHSEED": "0", "MC_STORE_CLIENT_SETUP_RETRIES": "1"})
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


# --- the command line (no Mooncake needed) ---------------------------------------------------------------
def test_version_and_help_say_simulated():
    out = subprocess.run([sys.executable, str(VLLM), "--version"], capture_output=True, check=False, text=True,
                         env=base_env())
    assert out.returncode == 0 and out.stdout.strip() == "0.22.1+sim"
    helped = subprocess.run([sys.executable, str(VLLM), "serve", "--help"], capture_output=True, check=False, text=True,
                            env=base_env())
    assert helped.returncode == 0
    assert helped.stdout.startswith("usage: vllm serve [model_tag] [options]")
    assert "SIMULATED" in helped.stdout and "--sim-time-scale" in helped.stdout
    for flag in ("--served-model-name", "--kv-transfer-config", "--max-num-batched-tokens",
                 "--no-enable-prefix-caching", "--tensor-parallel-size", "--gpu-memory-utilization", "--api-key",
                 "--data-parallel-size"):
        assert flag in helped.stdout


@pytest.mark.parametrize("argv, message", [
    # unknown flags are reported by the top-level `vllm` parser, as the real engine does (tests/conformance/)
    (["--no-such-flag"], "vllm: error: unrecognized arguments: --no-such-flag"),
    (["--disable-log-requests"], "vllm: error: unrecognized arguments: --disable-log-requests"),
    (["--dtype", "fp7"], "argument --dtype: invalid choice: 'fp7'"),
    (["--kv-transfer-config", '{"kv_connector": "AscendStoreConnector", "kv_role": '],
     "argument --kv-transfer-config: 1 validation error for KVTransferConfig\n  Invalid JSON"),
    (["--kv-transfer-config", '{"kv_connector": "AscendStoreConnector", "kv_role": "kv_all"}'],
     "Input should be 'kv_producer', 'kv_both' or 'kv_consumer' [type=literal_error"),
    (["--kv-transfer-config", '{"kv_connector": "AscendStoreConnector"}'], "Please specify kv_role"),
])
def test_rejected_like_vllm_argparse(model_dir, argv, message):
    port = free_port()
    out = subprocess.run([sys.executable, str(VLLM), "serve", str(model_dir), "--port", str(port)] + argv,
                         capture_output=True, check=False, text=True, env=base_env(), timeout=30)
    assert out.returncode == 2, out.stderr
    top = message.startswith("vllm: error: unrecognized")
    assert out.stderr.startswith("usage: vllm [-h] [-v]" if top else "usage: vllm serve [model_tag] [options]\n")
    assert message in out.stderr
    assert not listening(port)


def test_removed_flag_accepted_by_older_emulated_release(tmp_path):
    # --disable-log-requests exists up to vLLM 0.11: parsing passes, then the missing model fails (exit 1)
    out = subprocess.run([sys.executable, str(VLLM), "serve", str(tmp_path / "none"), "--disable-log-requests"],
                         capture_output=True, check=False, text=True, timeout=30,
                         env=base_env(KVPOOL_SIM_VLLM_VERSION="0.10.1"))
    assert out.returncode == 1
    assert "--disable-log-requests` is deprecated" in out.stderr
    assert "Invalid repository ID or local directory specified" in out.stderr


# --- start-time failures -------------------------------------------------------------------------------------
def _fail_case(name, workdir, model_dir, master_address):
    good = str(mooncake_json(workdir, master_address))
    bad_json = workdir / "bad.json"
    bad_json.write_text('{"metadata_server": "P2PHANDSHAKE",\n')
    no_master = workdir / "nomaster.json"
    no_master.write_text(json.dumps({"metadata_server": "P2PHANDSHAKE", "protocol": "tcp",
                                     "global_segment_size": "64MB", "local_buffer_size": "16MB"}))
    rdma = workdir / "rdma.json"
    rdma.write_text(json.dumps({"metadata_server": "P2PHANDSHAKE", "protocol": "rdma",
                                "master_server_address": master_address}))
    empty = workdir / "empty-model"
    empty.mkdir(exist_ok=True)
    kv = json.dumps(KV_NEW)
    cases = {
        "unknown connector": ({"MOONCAKE_CONFIG_PATH": good},
                              ["--kv-transfer-config", '{"kv_connector": "FooConnector", "kv_role": "kv_both"}'],
                              "ValueError: Unsupported connector type: FooConnector"),
        "new connector name on vllm-ascend 0.11": ({"MOONCAKE_CONFIG_PATH": good, "KVPOOL_SIM_VLLM_VERSION": "0.11.0"},
                                                   ["--kv-transfer-config", kv],
                                                   "Unsupported connector type: AscendStoreConnector"),
        "MOONCAKE_CONFIG_PATH unset": ({}, ["--kv-transfer-config", kv],
                                       "ValueError: The environment variable 'MOONCAKE_CONFIG_PATH' is not set."),
        "mooncake.json missing": ({"MOONCAKE_CONFIG_PATH": str(workdir / "nope.json")}, ["--kv-transfer-config", kv],
                                  "FileNotFoundError: [Errno 2] No such file or directory"),
        "mooncake.json invalid": ({"MOONCAKE_CONFIG_PATH": str(bad_json)}, ["--kv-transfer-config", kv],
                                  "json.decoder.JSONDecodeError"),
        "mooncake.json without master": ({"MOONCAKE_CONFIG_PATH": str(no_master)}, ["--kv-transfer-config", kv],
                                         "setup(): incompatible function arguments"),
        "protocol not supported": ({"MOONCAKE_CONFIG_PATH": str(rdma)}, ["--kv-transfer-config", kv],
                                   "NotImplementedError: MooncakeBackend does not support protocol 'rdma'."),
        "master unreachable": ({"MOONCAKE_CONFIG_PATH": good, "MOONCAKE_MASTER": "127.0.0.1:%d" % free_port()},
                               ["--kv-transfer-config", kv], "Initialize mooncake failed."),
        "tp larger than visible NPUs": ({"MOONCAKE_CONFIG_PATH": good, "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3"},
                                        ["--kv-transfer-config", kv, "--tensor-parallel-size", "8"],
                                        "Set visible device failed, invalid device=4, input visible devices:0,1,2,3"),
        "model without config.json": ({}, ["--model-placeholder"],
                                      "Invalid repository ID or local directory specified: '%s'" % empty),
    }
    env, args, message = cases[name]
    model = str(empty) if args == ["--model-placeholder"] else str(model_dir)
    if args == ["--model-placeholder"]:
        args = []
    return env, [model] + args, message


FAIL_CASES = ["unknown connector", "new connector name on vllm-ascend 0.11", "MOONCAKE_CONFIG_PATH unset",
              "mooncake.json missing", "mooncake.json invalid", "mooncake.json without master",
              "protocol not supported", "master unreachable", "tp larger than visible NPUs",
              "model without config.json"]


def _run_until_exit(cmd, env, port, timeout=60):
    """Run a failing start; the API port must never accept a connection while it runs."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + timeout
    ever_listened = False
    while proc.poll() is None and time.monotonic() < deadline:
        ever_listened |= listening(port)
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    return proc.returncode, out, err, ever_listened


def test_start_time_failures(mc_python, master, workdir, model_dir):
    """Every start-time failure: non-zero exit, the real-looking message, nothing ever listening."""

    # Every case's files are written before any stand-in starts: _fail_case rewrites them all, and a rewrite
    # while another case's stand-in reads its mooncake.json made that one fail on an empty file.
    cases = dict((name, _fail_case(name, workdir, model_dir, master)) for name in FAIL_CASES)

    def one(name):
        env_extra, args, message = cases[name]
        port = free_port()
        cmd = [mc_python, str(VLLM), "serve"] + args
        cmd += ["--port", str(port), "--host", "127.0.0.1", "--sim-startup-s", "0"]
        rc, out, err, ever_listened = _run_until_exit(cmd, base_env(**env_extra), port)
        return name, rc, out, err, ever_listened, message

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, FAIL_CASES))
    for name, rc, _out, err, ever_listened, message in results:
        assert rc == 1, "%s: rc %s\n%s" % (name, rc, err[-3000:])
        assert message in err, "%s: %r not in\n%s" % (name, message, err[-3000:])
        assert not ever_listened, name
        if name != "model without config.json":
            assert "RuntimeError: Engine core initialization failed. See root cause above." in err, name


def test_port_in_use_fails_before_the_engine(mc_python, model_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run([mc_python, str(VLLM), "serve", str(model_dir), "--host", "127.0.0.1", "--port",
                              str(port)], capture_output=True, check=False, text=True, env=base_env(), timeout=30)
    assert out.returncode == 1
    assert "OSError: [Errno 98] Address already in use" in out.stderr
    assert "Initializing a V1 LLM engine" not in out.stdout


# --- live instances on one real pool ------------------------------------------------------------------------
class Instance:
    def __init__(self, python, model_dir, workdir, name, env, extra_args=()):
        self.port = free_port()
        self.name = name
        self.log_path = workdir / ("%s.log" % name)
        self.log = open(self.log_path, "w")
        cmd = [python, str(VLLM), "serve", str(model_dir), "--served-model-name", SERVED, "--dtype", "bfloat16",
               "--max-model-len", "25600", "--host", "127.0.0.1", "--port", str(self.port),
               "--max-num-batched-tokens", "4096", "--gpu-memory-utilization", "0.9"] + list(extra_args)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.headers = {}

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("%s exited %s:\n%s" % (self.name, self.proc.returncode, self.text()[-3000:]))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/health" % self.port, timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.05)
        raise AssertionError("%s not healthy:\n%s" % (self.name, self.text()[-3000:]))

    def text(self):
        self.log.flush()
        return self.log_path.read_text()

    def get(self, path, headers=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path),
                                     headers=self.headers if headers is None else headers)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()

    def post(self, path, body, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(self.headers if headers is None else headers)
        conn.request("POST", path, json.dumps(body), hdrs)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    def metrics(self):
        body = self.get("/metrics")[1]
        values = {}
        for line in body.decode().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            key, value = line.rsplit(" ", 1)
            values[key] = float(value)
        return values

    def stream_chat(self, content, max_tokens=10):
        """Streaming chat as the benchmark sends it; returns (ttft seconds, events, content pieces)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        body = {"model": SERVED, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True}
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(self.headers)
        start = time.monotonic()
        conn.request("POST", "/v1/chat/completions", json.dumps(body), hdrs)
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("content-type").startswith("text/event-stream")
        ttft, events, pieces = None, [], []
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            assert line.startswith(b"data: "), line
            payload = line[len(b"data: "):]
            events.append(payload)
            if payload == b"[DONE]":
                break
            chunk = json.loads(payload)
            for choice in chunk["choices"]:
                if choice["delta"].get("content"):
                    if ttft is None:
                        ttft = time.monotonic() - start
                    pieces.append(choice)
        conn.close()
        return ttft, events, pieces

    def stop(self, signalled=False):
        if self.proc.poll() is None:
            if not signalled:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


# Timings for the live tests: time scale 1.0 (the modelled hardware figures, not the default 0.1) so that the
# three steps differ by tens of milliseconds, well above scheduling noise; a small device cache (48 blocks)
# so that dataset B (4 x 16 blocks) evicts dataset A from it.
LIVE_SIM_ARGS = ["--sim-time-scale", "1.0", "--sim-startup-s", "0.3", "--sim-device-blocks", "48",
                 "--sim-decode-ms-per-token", "2"]
PROMPT_WORDS = 2043  # + 5 template tokens = 2048 prompt tokens = 16 blocks of 128
PROMPT_TOKENS = PROMPT_WORDS + 5
HIT_TOKENS = ((PROMPT_TOKENS - 1) // 128) * 128  # the last block holds the token that must be computed


def dataset(seed, n):
    rnd = random.Random(seed)
    return [" ".join("w%d" % rnd.randrange(10**6) for _word in range(PROMPT_WORDS)) for _prompt in range(n)]


@pytest.fixture(scope="module")
def cluster(mc_python, master, workdir, model_dir):
    config = str(mooncake_json(workdir, master))
    common = {"MOONCAKE_CONFIG_PATH": config, "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3"}
    kv1 = dict(KV_GUIDE)
    kv2 = json.loads(json.dumps(KV_NEW))
    kv2["kv_connector_extra_config"]["lookup_rpc_port"] = 2
    kv3 = json.loads(json.dumps(KV_NEW))
    kv3["kv_connector_extra_config"]["lookup_rpc_port"] = 3
    rpc_base = str(workdir)
    instances = {
        "node1": Instance(mc_python, model_dir, workdir, "node1", base_env(VLLM_RPC_BASE_PATH=rpc_base, **common),
                          ["--tensor-parallel-size", "4", "--kv-transfer-config", json.dumps(kv1)] + LIVE_SIM_ARGS),
        "node2": Instance(mc_python, model_dir, workdir, "node2",
                          base_env(VLLM_RPC_BASE_PATH=rpc_base, VLLM_API_KEY="sekret", **common),
                          ["--tensor-parallel-size", "4", "--kv-transfer-config", json.dumps(kv2)] + LIVE_SIM_ARGS),
        "seed1": Instance(mc_python, model_dir, workdir, "seed1",
                          base_env(VLLM_RPC_BASE_PATH=rpc_base, PYTHONHASHSEED="1", **common),
                          ["--tensor-parallel-size", "4", "--kv-transfer-config", json.dumps(kv3)] + LIVE_SIM_ARGS),
    }
    instances["node2"].headers = {"Authorization": "Bearer sekret"}
    try:
        for inst in instances.values():
            inst.wait_ready()
        yield instances
    finally:
        # SIGTERM to all at once: each one's graceful close (the real Mooncake store's) takes seconds
        running = [inst for inst in instances.values() if inst.proc.poll() is None]
        for inst in running:
            inst.proc.send_signal(signal.SIGTERM)
        for inst in instances.values():
            inst.stop(signalled=inst in running)


def test_health_models_version(cluster):
    node1 = cluster["node1"]
    assert node1.get("/health") == (200, b"")
    status, body = node1.get("/v1/models")
    models = json.loads(body)
    assert status == 200 and models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [SERVED]
    assert models["data"][0]["max_model_len"] == 25600
    assert json.loads(node1.get("/version")[1]) == {"version": "0.22.1+sim"}
    text = node1.text()
    assert "It is recommended to use the AscendStoreConnector" in text  # the guide's old connector name
    assert "It is recommended to use the lookup_rpc_port" in text  # and its mooncake_rpc_port
    assert "SIMULATED" in text
    assert "# HELP vllm:prefix_cache_queries_total [SIMULATED vLLM stand-in]" in node1.get("/metrics")[1].decode()


def test_api_key_guards_v1_only(cluster):
    node2 = cluster["node2"]
    with pytest.raises(urllib.error.HTTPError) as denied:
        node2.get("/v1/models", headers={})
    assert denied.value.code == 401 and json.loads(denied.value.read()) == {"error": "Unauthorized"}
    assert node2.get("/health", headers={})[0] == 200
    assert node2.get("/metrics", headers={})[0] == 200
    assert node2.get("/v1/models")[0] == 200


def test_http_requests_counted_as_vllms_instrumentator_counts_them(cluster):
    """http_requests_total{handler,method,status} as in the recording of the real engine (fixtures/vllm/): status
    grouped, /health and /metrics not counted, a 401 counted under its route, an unknown route as "none"."""
    node2 = cluster["node2"]

    def counts():
        out = {}
        for line in node2.get("/metrics")[1].decode().splitlines():
            if line.startswith("http_requests_total{"):
                labels, value = line.split(" ")
                out[labels[len("http_requests_total"):]] = float(value)
        return out

    before = counts()
    node2.get("/health")
    node2.get("/v1/models")
    with pytest.raises(urllib.error.HTTPError):
        node2.get("/v1/models", headers={})
    with pytest.raises(urllib.error.HTTPError):
        node2.get("/no/such/route")
    expected = {'{handler="/v1/models",method="GET",status="2xx"}': 1.0,
                '{handler="/v1/models",method="GET",status="4xx"}': 1.0,
                '{handler="none",method="GET",status="4xx"}': 1.0}
    # A request is counted once its answer is sent (as the instrumentator's middleware does): the last one may land
    # a moment after the client has read it, so read again briefly until it has (a busy machine, rehearsal 6).
    deadline = time.monotonic() + 5.0
    while True:
        after = counts()
        delta = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
        if delta == expected or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert delta == expected
    assert not any("/health" in k or "/metrics" in k for k in after)


def test_streaming_chat_exact_tokens_with_ignore_eos(cluster):
    ttft, events, pieces = cluster["node1"].stream_chat("tell me about kv caches", max_tokens=7)
    assert ttft is not None
    assert events[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == SERVED for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len(pieces) == 7
    assert [p["finish_reason"] for p in pieces] == [None] * 6 + ["length"]


def test_completions_and_validation(cluster):
    node1 = cluster["node1"]
    status, body = node1.post("/v1/completions", {"model": SERVED, "prompt": "a b c", "max_tokens": 4,
                                                  "ignore_eos": True})
    data = json.loads(body)
    assert status == 200 and data["object"] == "text_completion"
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                             "prompt_tokens_details": None}
    status, body = node1.post("/v1/chat/completions", {"model": SERVED, "max_tokens": 3,
                                                       "messages": [{"role": "user", "content": "hi"}]})
    data = json.loads(body)
    assert status == 200 and data["object"] == "chat.completion"
    assert data["usage"]["prompt_tokens"] == 1 + 5 and data["usage"]["completion_tokens"] == 3
    status, body = node1.post("/v1/completions", {"model": SERVED, "prompt": [1, 2, 3], "max_tokens": 2,
                                                  "stream": True})
    assert status == 200 and b'"object":"text_completion"' in body and body.rstrip().endswith(b"data: [DONE]")
    assert node1.post("/v1/completions", {"model": "other", "prompt": "x", "max_tokens": 1})[0] == 404
    status, body = node1.post("/v1/completions", {"model": SERVED, "prompt": "x", "max_tokens": 30000})
    assert status == 400 and b"maximum context length is 25600 tokens" in body


def _delta(before, after, name, **labels):
    want = 'engine="0",model_name="%s"' % SERVED
    for key, value in after.items():
        if key.startswith(name + "{") and want in key and all('%s="%s"' % kv in key for kv in labels.items()):
            return value - before.get(key, 0.0)
    raise KeyError(name)


def _puts_settled(inst, timeout=30.0):
    """Wait until the instance's asynchronous sending thread has put every queued block into the pool
    (the stand-in's gauge kvpool_sim_pool_put_pending is 0), so the next step sees all of them."""
    deadline = time.monotonic() + timeout
    while True:
        pending = [v for k, v in inst.metrics().items() if k.startswith("kvpool_sim_pool_put_pending")]
        assert pending, "the stand-in exports kvpool_sim_pool_put_pending"
        if not any(pending):
            return
        assert time.monotonic() < deadline, "puts still pending after %.0f s" % timeout
        time.sleep(0.02)


def _step(inst, prompts):
    before = inst.metrics()
    ttfts = []
    for prompt in prompts:
        ttft, events, pieces = inst.stream_chat(prompt, max_tokens=10)
        assert len(pieces) == 10 and events[-1] == b"[DONE]"
        ttfts.append(ttft)
    _puts_settled(inst)
    after = inst.metrics()
    counters = {name: _delta(before, after, name) for name in (
        "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
        "vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total")}
    counters["own"] = _delta(before, after, "kvpool_sim_pool_load_tokens_total", source="own_segment")
    counters["other"] = _delta(before, after, "kvpool_sim_pool_load_tokens_total", source="other_segment")
    counters["ttft_count"] = _delta(before, after, "vllm:time_to_first_token_seconds_count")
    return sorted(ttfts)[len(ttfts) // 2], counters


def test_guide_three_steps_through_the_real_pool(cluster):
    """The guide's sequence: A on node1 (no cache), B on node1 (evicts A from the device), A on node1 (local DRAM
    hits), A on node2 (cross-node hits): external hits where the guide expects them, TTFT1 > TTFT3 > TTFT2."""
    node1, node2 = cluster["node1"], cluster["node2"]
    data_a, data_b = dataset(1, 4), dataset(2, 4)
    n = len(data_a)

    ttft1, c1 = _step(node1, data_a)
    assert c1["vllm:prefix_cache_queries_total"] == n * PROMPT_TOKENS
    assert c1["vllm:prefix_cache_hits_total"] == 0
    assert c1["vllm:external_prefix_cache_queries_total"] == n * PROMPT_TOKENS
    assert c1["vllm:external_prefix_cache_hits_total"] == 0
    assert c1["ttft_count"] == n

    cb = _step(node1, data_b)[1]
    assert cb["vllm:external_prefix_cache_hits_total"] == 0

    ttft2, c2 = _step(node1, data_a)
    assert c2["vllm:prefix_cache_hits_total"] == 0  # B pushed A out of the (simulated) device cache
    assert c2["vllm:external_prefix_cache_queries_total"] == n * PROMPT_TOKENS
    assert c2["vllm:external_prefix_cache_hits_total"] == n * HIT_TOKENS
    assert c2["own"] == n * HIT_TOKENS and c2["other"] == 0  # node1's own segment: local DRAM

    ttft3, c3 = _step(node2, data_a)
    assert c3["vllm:prefix_cache_hits_total"] == 0
    assert c3["vllm:external_prefix_cache_hits_total"] == n * HIT_TOKENS
    assert c3["other"] == n * HIT_TOKENS and c3["own"] == 0  # node1's segment: the other node

    print("median TTFT ms: step1 (no cache) %.1f, step2 (local DRAM) %.1f, step3 (cross-node) %.1f"
          % (1000 * ttft1, 1000 * ttft2, 1000 * ttft3))
    assert ttft1 > ttft3 > ttft2, (ttft1, ttft2, ttft3)

    # the last prompt of A again on node1: now straight from the device cache, the pool is not asked for it
    c4 = _step(node1, data_a[-1:])[1]
    assert c4["vllm:prefix_cache_hits_total"] == HIT_TOKENS
    assert c4["vllm:external_prefix_cache_queries_total"] == PROMPT_TOKENS - HIT_TOKENS
    assert c4["vllm:external_prefix_cache_hits_total"] == 0


def test_different_pythonhashseed_loses_cross_node_hits(cluster):
    """Same prompts, same pool, same model, PYTHONHASHSEED=1 instead of 0: no block hash matches, no pool hit."""
    data_c = dataset(3, 2)
    _step(cluster["node1"], data_c)  # PYTHONHASHSEED=0: computed and put into the pool (the step waits for the puts)
    counters = _step(cluster["seed1"], data_c)[1]
    assert counters["vllm:external_prefix_cache_queries_total"] == 2 * PROMPT_TOKENS
    assert counters["vllm:external_prefix_cache_hits_total"] == 0
    again = _step(cluster["node2"], data_c)[1]  # PYTHONHASHSEED=0 on the other node: every block hits
    assert again["vllm:external_prefix_cache_hits_total"] == 2 * HIT_TOKENS


def test_sigterm_stops_gracefully(cluster):
    inst = cluster["seed1"]
    rc = inst.stop()
    assert rc == 0
    assert "INFO:     Shutting down" in inst.log_path.read_text()
    assert not listening(inst.port)


# --- the render endpoints vllm-router's cache_aware calls, per emulated release ------------------------------------
@pytest.mark.parametrize("version, extra, code", [
    ("0.14.1", [], 404),                          # before vLLM 0.15.0: not there
    ("0.22.1", [], 200),                          # 0.15.0 - 0.29.x: served on plain `vllm serve`
    ("0.31.0", [], 404),                          # 0.30 - 0.31: gated off, not routed
    ("0.32.0", [], 403),                          # 0.32+: gated off, PermissionDeniedError
    ("0.32.0", ["--enable-scale-out"], 200),      # ... unless the gate is opened
])
def test_render_endpoint_as_the_emulated_release_serves_it(mc_python, model_dir, workdir, version, extra, code):
    inst = Instance(mc_python, model_dir, workdir, "render-%s" % version,  # no simulated model loading (1 s)
                    base_env(KVPOOL_SIM_VLLM_VERSION=version, VLLM_API_KEY="sekret", KVPOOL_SIM_STARTUP_S="0"), extra)
    try:
        inst.wait_ready()
        body = {"model": SERVED, "messages": [{"role": "user", "content": "one two three"}], "max_tokens": 1}
        assert inst.post("/v1/chat/completions/render", body, headers={})[0] == 401  # behind the API key
        status, data = inst.post("/v1/chat/completions/render", body, headers={"Authorization": "Bearer sekret"})
        assert status == code, data
        if code == 200:
            doc = json.loads(data)
            assert doc["token_ids"] and doc["request_id"].startswith("chatcmpl-") and doc["model"] == SERVED
        if code == 403:
            assert json.loads(data)["error"]["type"] == "PermissionDeniedError"
    finally:
        inst.stop()


def test_an_unread_body_does_not_spill_into_the_next_request(mc_python, model_dir, workdir):
    """404 / 401 answered before the body is read: on the same kept-alive connection the next request still parses
    (uvicorn discards the rest of a body; vllm-router 0.1.17 falls back from a 404 render to /tokenize on the same
    connection)."""
    env = base_env(KVPOOL_SIM_VLLM_VERSION="0.14.1", VLLM_API_KEY="sekret", KVPOOL_SIM_STARTUP_S="0")
    inst = Instance(mc_python, model_dir, workdir, "keepalive", env)
    try:
        inst.wait_ready()
        conn = http.client.HTTPConnection("127.0.0.1", inst.port, timeout=30)
        body = json.dumps({"model": SERVED, "messages": [{"role": "user", "content": "a b c"}]})
        auth = {"Content-Type": "application/json", "Authorization": "Bearer sekret"}
        for path, headers, code in (("/v1/chat/completions/render", auth, 404),
                                    ("/v1/chat/completions", {"Content-Type": "application/json"}, 401),
                                    ("/tokenize", auth, 200)):
            conn.request("POST", path, body, headers)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == code, path
        conn.close()
    finally:
        inst.stop()
