"""The REAL Mooncake KV pool client, set up the way vllm-ascend's MooncakeBackend does it.

`MooncakeStoreConfig.load_from_env()` semantics (MOONCAKE_CONFIG_PATH, JSON keys, "100GB" sizes, 1 GiB
defaults) and `MooncakeDistributedStore().setup(...)` with `Initialize mooncake failed.` on a non-zero
return are mirrored from vllm-ascend; every exist/put/get goes to the real store and the real master.

Only the *payload* is stand-in data: a small header (magic, block hash, writer) plus filler, a few KiB per
block instead of the MiBs of real KV tensors (--sim-kv-bytes-per-block).
"""

import json
import os
import re
import socket
import threading
import time
import uuid

from . import log

DEFAULT_GLOBAL_SEGMENT_SIZE = 1073741824  # 1.0 GiB, as vllm-ascend's mooncake_backend.py
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824  # 1.0 GiB
MAGIC = b"KVPOOL-SIM-KV1\n"  # marks a stand-in KV block payload in the pool


def parse_size(value):
    """vllm-ascend's _parse_global_segment_size: int, or a string with GB/MB/KB/B (1024-based)."""
    if isinstance(value, bool):
        raise TypeError("Unsupported type for global_segment_size: %s" % type(value))
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        try:
            return int(value)
        except (TypeError, ValueError) as exc:
            raise TypeError("Unsupported type for global_segment_size: %s" % type(value)) from exc
    cleaned = value.strip().lower()
    if not cleaned:
        raise ValueError("global segment size cannot be empty.")
    match = re.match(r"^\s*([\d.]+)\s*(gb|mb|kb|b)?\s*$", cleaned)
    if not match:
        raise ValueError("Invalid format: '%s'" % value)
    number, unit = match.group(1), match.group(2) or "b"
    multiplier = {"gb": 1024**3, "mb": 1024**2, "kb": 1024, "b": 1}[unit]
    try:
        numeric = float(number)
    except ValueError as exc:
        raise ValueError("Invalid numeric value '%s' in: '%s'" % (number, value)) from exc
    return int(numeric * multiplier)


class MooncakeStoreConfig:
    def __init__(self, data):
        self.metadata_server = data.get("metadata_server")
        self.global_segment_size = parse_size(data.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE))
        self.local_buffer_size = parse_size(data.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE))
        self.protocol = data.get("protocol", "ascend")
        self.device_name = data.get("device_name", "")
        self.master_server_address = data.get("master_server_address")

    @staticmethod
    def load_from_env():
        config_path = os.getenv("MOONCAKE_CONFIG_PATH")
        if not config_path:
            raise ValueError("The environment variable 'MOONCAKE_CONFIG_PATH' is not set.")
        with open(config_path) as handle:
            data = json.load(handle)
        config = MooncakeStoreConfig(data)
        # recent vllm-ascend / Mooncake releases let these variables override the file
        if os.getenv("MOONCAKE_MASTER"):
            config.master_server_address = os.environ["MOONCAKE_MASTER"]
            log.info("mooncake_backend.py", "MOONCAKE_MASTER overrides master_server_address: %s"
                     % config.master_server_address)
        if os.getenv("MOONCAKE_GLOBAL_SEGMENT_SIZE"):
            config.global_segment_size = parse_size(os.environ["MOONCAKE_GLOBAL_SEGMENT_SIZE"])
            log.info("mooncake_backend.py", "MOONCAKE_GLOBAL_SEGMENT_SIZE overrides global_segment_size: %d"
                     % config.global_segment_size)
        return config


def get_ip():
    """vLLM's get_ip(): VLLM_HOST_IP, else the address of the default route (a UDP connect sends nothing)."""
    host_ip = os.environ.get("VLLM_HOST_IP")
    if host_ip:
        return host_ip
    for family, target in ((socket.AF_INET, ("8.8.8.8", 80)), (socket.AF_INET6, ("2001:4860:4860::8888", 80))):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.connect(target)
                return sock.getsockname()[0]
        except OSError:
            continue
    log.warning("network_utils.py", "Failed to get the IP address, using 0.0.0.0 by default."
                "The value can be set by the environment variable VLLM_IP or HOST_IP.")
    return "0.0.0.0"


class MooncakePool:
    """One real MooncakeDistributedStore per instance (vllm-ascend sets up one per TP rank: see README)."""

    def __init__(self, config, kv_bytes_per_block, placement):
        try:
            from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "Please install mooncake by following the instructions at "
                "https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/build.md "
                "to run vLLM with MooncakeConnector.") from exc
        self._replicate_config_cls = ReplicateConfig
        self.config = config
        self.kv_bytes_per_block = kv_bytes_per_block
        self.placement = placement
        self.store = MooncakeDistributedStore()
        self.local_hostname = get_ip()
        log.info("mooncake_backend.py", "Mooncake store setup: local_hostname=%s metadata_server=%s protocol=%s "
                 "master_server_address=%s global_segment_size=%d local_buffer_size=%d"
                 % (self.local_hostname, config.metadata_server, config.protocol, config.master_server_address,
                    config.global_segment_size, config.local_buffer_size))
        ret = self.store.setup(
            self.local_hostname,
            config.metadata_server,
            config.global_segment_size,
            config.local_buffer_size,
            config.protocol,
            config.device_name,
            config.master_server_address,
        )
        if ret != 0:
            msg = "Initialize mooncake failed."
            log.error("mooncake_backend.py", msg)
            raise RuntimeError(msg)
        self.segment = self.store.get_hostname()
        self.own_endpoint = self._discover_own_endpoint()
        self.writer = "%s|%s|%d" % (socket.gethostname(), self.segment, os.getpid())
        self._closed = False
        self._lock = threading.Lock()
        log.info("mooncake_backend.py", "Mooncake store ready: segment %s (transport endpoint %s)"
                 % (self.segment, self.own_endpoint))

    def _replicate_config(self):
        config = self._replicate_config_cls()
        if self.placement == "own":
            config.preferred_segment = self.segment
        return config

    def _discover_own_endpoint(self):
        """Which transport endpoint the replicas in this instance's own segment report (a real round trip)."""
        probe = "kvpool-sim-probe-%s" % uuid.uuid4().hex
        config = self._replicate_config_cls()
        config.preferred_segment = self.segment
        if self.store.put(probe, b"probe", config) != 0:
            return None
        try:
            replicas = self.store.get_replica_desc(probe)
            return _endpoint(replicas)
        finally:
            self.store.remove(probe)

    # --- payloads -------------------------------------------------------------------------------------
    def payload(self, key, block_hash_hex, tp_size):
        size = max(256, self.kv_bytes_per_block // max(1, tp_size))
        header = MAGIC + json.dumps({"hash": block_hash_hex, "writer": self.writer, "key": key}).encode() + b"\n"
        filler = (block_hash_hex.encode() * (size // 64 + 1))[: max(0, size - len(header))]
        return header + filler

    @staticmethod
    def check_payload(data, block_hash_hex):
        if not data or not data.startswith(MAGIC):
            return False
        try:
            header = json.loads(data[len(MAGIC):data.index(b"\n", len(MAGIC))])
        except (ValueError, IndexError):
            return False
        return header.get("hash") == block_hash_hex

    # --- real pool operations -------------------------------------------------------------------------
    def exists(self, keys):
        if not keys:
            return []
        return list(self.store.batch_is_exist(keys))

    def put_missing(self, keys, payloads):
        """Like vllm-ascend's sending thread: skip keys already in the pool, put the others."""
        exist = self.exists(keys)
        config = self._replicate_config()
        done = 0
        for key, data, present in zip(keys, payloads, exist):
            if present == 1:
                continue
            ret = self.store.put(key, data, config)
            if ret < 0:
                log.error("mooncake_backend.py", "Failed to put key %s,res:%s" % ([key], [ret]))
            else:
                done += 1
        return done

    def get(self, keys):
        """Real batch get; returns (list of bytes, seconds)."""
        start = time.monotonic()
        values = self.store.get_batch(keys)
        return list(values), time.monotonic() - start

    def locations(self, keys):
        """For each key: 'own' if its replica is in this instance's segment, 'other' if elsewhere, None if gone."""
        found = self.store.batch_get_replica_desc(keys)
        out = []
        for key in keys:
            endpoint = _endpoint(found.get(key) or [])
            if endpoint is None:
                out.append(None)
            else:
                out.append("own" if endpoint == self.own_endpoint else "other")
        return out

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.store.close()
        except Exception as exc:  # noqa: BLE001 - closing on the way out
            log.warning("mooncake_backend.py", "closing the Mooncake store failed: %s" % exc)


def _endpoint(replicas):
    for replica in replicas:
        try:
            if replica.is_memory_replica():
                return replica.get_memory_descriptor().buffer_descriptor.transport_endpoint
        except Exception:  # noqa: BLE001 - descriptor layout differs between Mooncake releases
            continue
    return None
