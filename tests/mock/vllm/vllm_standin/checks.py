"""Start-time checks that fail the way vLLM / vllm-ascend fail, with messages mirrored from their sources.

Real sources (vllm-project/vllm, vllm-project/vllm-ascend): transformers_utils/config.py ("Invalid repository
ID or local directory specified"), distributed/kv_transfer/kv_connector/factory.py ("Unsupported connector
type"), vllm_ascend/distributed/kv_transfer/__init__.py (registered connector names),
ascend_store_connector.py (the MooncakeConnectorStoreV1 warning), pool_scheduler.py (lookup IPC path),
pool_worker.py (backend map). The NPU device failure is what torch_npu / CANN print when a worker's device
index is not visible (EE1001 ... Set visible device failed); the stand-in raises it itself: SIMULATED.
"""

import json
import os
import socket
import tempfile

from . import log, version_tuple

# connectors vllm-ascend registers (v0.11 .. current), and upstream vLLM's own
STORE_CONNECTORS = ("MooncakeConnectorStoreV1", "AscendStoreConnector")
OTHER_KNOWN_CONNECTORS = (
    "MooncakeConnectorV1", "MooncakeConnectorV2", "MooncakeD2RHConnectorV1", "MooncakePullConnector",
    "MooncakeHybridConnector", "MooncakeLayerwiseConnector", "UCMConnector", "MultiConnector",
    "OffloadingConnector", "SimpleCPUOffloadConnector", "PreemptOffloadConnector", "SfaRemoteD2HConnector",
    "SharedStorageConnector", "P2pNcclConnector", "LMCacheConnectorV1", "NixlConnector", "MooncakeConnector",
    "ExampleConnector", "OffloadingConnector", "DecodeBenchConnector",
)


class StartupError(Exception):
    """A start-time failure: `lines` are printed (stderr) before the engine-core failure line."""

    def __init__(self, message, lines=None, exc_type="RuntimeError"):
        super().__init__(message)
        self.lines = lines or []
        self.exc_type = exc_type


def check_model_dir(model):
    """ModelConfig needs config.json (or params.json) in a local directory; hub downloads are not simulated."""
    config_path = os.path.join(model, "config.json")
    if os.path.isdir(model) and (os.path.isfile(config_path) or os.path.isfile(os.path.join(model, "params.json"))):
        data = {}
        if os.path.isfile(config_path):
            try:
                with open(config_path) as handle:
                    data = json.load(handle)
            except ValueError:
                data = {}
        return data if isinstance(data, dict) else {}
    msg = (
        "Invalid repository ID or local directory specified: '%s'.\n"
        "Please verify the following requirements:\n"
        "1. Provide a valid Hugging Face repository ID.\n"
        "2. Specify a local directory that contains a recognized configuration file.\n"
        "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
        "   - For Mistral models: ensure the presence of a 'params.json'.\n" % model
    )
    raise StartupError(msg, exc_type="ValueError")


def visible_devices():
    """ASCEND_RT_VISIBLE_DEVICES as CANN reads it; None when unset (then the stand-in does not limit)."""
    raw = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if raw is None or raw.strip() == "":
        return None
    try:
        ids = [int(piece) for piece in raw.split(",")]
    except ValueError:
        raise StartupError(
            "init:build/CMakeFiles/torch_npu.dir/compiler_depend.ts NPU function error: "
            "aclrtGetDeviceCount(&device_count), error code is 207004",
            lines=["EE1001: The argument is invalid.Reason: set ASCEND_RT_VISIBLE_DEVICES:%s error, "
                   "input data is invalid" % raw,
                   "[sim] ASCEND_RT_VISIBLE_DEVICES must be a comma-separated list of NPU ids"]) from None
    if ids != sorted(set(ids)):
        raise StartupError(
            "init:build/CMakeFiles/torch_npu.dir/compiler_depend.ts NPU function error: "
            "aclrtGetDeviceCount(&device_count), error code is 207004",
            lines=["EE1001: The argument is invalid.Reason: set ASCEND_RT_VISIBLE_DEVICES:%s error, "
                   "it must be configured in ascending order" % raw])
    return ids


def check_devices(tensor_parallel_size, pipeline_parallel_size, data_parallel_size):
    """Each worker calls torch.npu.set_device(local_rank); a rank beyond the visible NPUs fails (SIMULATED)."""
    world = tensor_parallel_size * pipeline_parallel_size * data_parallel_size
    ids = visible_devices()
    if ids is None or world <= len(ids):
        return ids
    bad_rank = len(ids)
    raise StartupError(
        "exchangeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts NPU function error: "
        "aclrtSetDevice(device), error code is 107001",
        lines=[
            "(EngineCore_DP0 pid=%d) (Worker_TP%d pid=%d) ERROR %s WorkerProc failed to start." % (
                os.getpid(), bad_rank, os.getpid(), "[multiproc_executor.py]"),
            "[ERROR] (PID:%d, Device:%d, RankID:-1) ERR00100 PTA call acl api failed" % (os.getpid(), bad_rank),
            "EE1001: The argument is invalid.Reason: Set visible device failed, invalid device=%d, "
            "input visible devices:%s" % (bad_rank, ",".join(str(i) for i in ids)),
            "        rtSetDevice execute failed, reason=[device id error]",
            "        open device %d failed, runtime result = 107001." % bad_rank,
            "[sim] tensor_parallel_size (%d) x pipeline_parallel_size (%d) x data_parallel_size (%d) needs %d "
            "NPUs, ASCEND_RT_VISIBLE_DEVICES lists %d"
            % (tensor_parallel_size, pipeline_parallel_size, data_parallel_size, world, len(ids)),
        ])


def check_connector(kv_transfer_config, version):
    """KVConnectorFactory: the names vllm-ascend registers for the emulated release; returns the extra config."""
    name = kv_transfer_config.get("kv_connector")
    registered = list(STORE_CONNECTORS)
    if version < (0, 12, 0):
        registered.remove("AscendStoreConnector")  # the v0.12+ name
    if name not in registered:
        if name in OTHER_KNOWN_CONNECTORS:
            raise StartupError(
                "[sim] connector %r exists in vLLM / vllm-ascend but is not simulated by the stand-in; "
                "only %s are (KV pool store connectors)" % (name, " and ".join(registered)),
                exc_type="NotImplementedError")
        raise StartupError("Unsupported connector type: %s" % name, exc_type="ValueError")
    if name == "MooncakeConnectorStoreV1" and version >= (0, 13, 0):
        log.warning("ascend_store_connector.py",
                    "It is recommended to use the AscendStoreConnector, as the MoonCakeStoreConnector will be "
                    "removed in the future.")
    extra = kv_transfer_config.get("kv_connector_extra_config") or {}
    backend = str(extra.get("backend", "mooncake")).lower()
    if backend in ("memcache", "yuanrong"):
        raise StartupError("[sim] kv_connector_extra_config.backend=%r is a real vllm-ascend backend but is not "
                           "simulated; the stand-in only has the Mooncake backend" % backend,
                           exc_type="NotImplementedError")
    if backend != "mooncake":
        raise StartupError("", exc_type="AssertionError",
                           lines=["[sim] vllm-ascend's pool_worker.py asserts on the unknown backend %r "
                                  "(backend_map has mooncake, memcache, yuanrong)" % backend])
    return extra


def lookup_ipc_path(extra):
    """pool_scheduler.get_zmq_rpc_path_lookup: ipc://$VLLM_RPC_BASE_PATH/lookup_rpc_port_<port>_dp_rank0."""
    if "lookup_rpc_port" in extra:
        port = extra["lookup_rpc_port"]
    elif "mooncake_rpc_port" in extra:
        port = extra["mooncake_rpc_port"]
        log.warning("pool_scheduler.py", "It is recommended to use the lookup_rpc_port, as the mooncake_rpc_port "
                    "will be removed in the future.")
    else:
        port = 0
    base = os.environ.get("VLLM_RPC_BASE_PATH", tempfile.gettempdir())
    return os.path.join(base, "lookup_rpc_port_%s_dp_rank0" % port)


class LookupSocket:
    """The LookupKeyServer's IPC endpoint. libzmq unlinks an existing path before bind, so a second instance
    with the same lookup_rpc_port silently takes it over; the stand-in does the same and says so ([sim])."""

    def __init__(self, path):
        self.path = path
        self.sock = None
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        if os.path.exists(path):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(path)
                log.warning("pool_scheduler.py",
                            "[sim] another live process listens on the lookup IPC path ipc://%s (same "
                            "lookup_rpc_port on this host): real vllm-ascend (libzmq) silently takes the path "
                            "over and the other instance's prefix lookups would be answered by this one" % path)
            except OSError:
                pass
            finally:
                probe.close()
            try:
                os.unlink(path)
            except OSError:
                pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.ino = os.stat(path).st_ino

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            try:
                if os.stat(self.path).st_ino == self.ino:
                    os.unlink(self.path)
            except OSError:
                pass


def emulated():
    from . import emulated_version

    return version_tuple(emulated_version())
