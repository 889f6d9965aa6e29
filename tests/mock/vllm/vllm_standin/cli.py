"""The `vllm` command line of the SIMULATED stand-in: `vllm serve MODEL [options]`, `vllm --version`.

Flags, their types and the argparse errors follow vLLM's: a bad value is the serve parser's error
(`usage: vllm serve [model_tag] [options]`, `vllm serve: error: argument ...`, exit 2); an unknown flag is the
top-level `vllm` parser's (`vllm: error: unrecognized arguments: ...`, exit 2), because `vllm serve` is an
argparse sub-command and argparse reports the sub-parser's leftovers from the top parser (seen on the real
engine, tests/conformance/). Unique abbreviations of long flags are taken, as vLLM's FlexibleArgumentParser
(argparse's default allow_abbrev) does. Flags outside the subset below are rejected exactly as vLLM rejects
unknown flags, so a collection that passes something vLLM does not know fails here too.
Simulation knobs live in their own `--sim-*` group; each defaults from a `KVPOOL_SIM_*` variable so the
collection never has to pass them.
"""

import argparse
import json
import os
import re
import sys

from . import SIMULATED_NOTE, emulated_version, reported_version, version_tuple

EPILOG = (
    SIMULATED_NOTE + ". This is test equipment of the ascend.kvpool collection (tests/mock/vllm/README.md): "
    "a toy whitespace tokenizer, filler output text, simulated prefill/decode/pool-load times scaled by "
    "--sim-time-scale; the Mooncake store client, every KV block put/exist/get in the pool and vLLM's "
    "PYTHONHASHSEED-seeded block hashing are real."
)

# name, env var, type, default, help
SIM_OPTIONS = [
    ("time-scale", float, 0.1,
     "factor applied to every simulated prefill/decode/pool-load duration (1.0 = the modelled Atlas 800T A2 "
     "figures of the seed guide; default 0.1 so that tests run ten times faster)"),
    ("startup-s", float, 1.0,
     "simulated engine start (model load, KV cache allocation) before the API port listens; not scaled"),
    ("prefill-ms-per-1k-tokens", float, 100.0,
     "simulated prefill time of prompt tokens that are computed (not cache hits), per 1000 tokens, before scaling"),
    ("decode-ms-per-token", float, 40.0, "simulated time per output token after the first, before scaling"),
    ("pool-load-ms-per-1k-tokens", float, 36.0,
     "simulated time to load pool-hit tokens whose replica lives in this instance's own Mooncake segment "
     "(local DRAM), per 1000 tokens, before scaling; added to the real get latency"),
    ("pool-remote-load-ms-per-1k-tokens", float, 47.0,
     "same for replicas in another instance's segment (another node's DRAM)"),
    ("device-blocks", int, 512,
     "blocks the simulated NPU KV cache holds (LRU); at the default 128-token blocks 512 blocks are 65536 tokens"),
    ("kv-bytes-per-block", int, 16384,
     "bytes actually put into the pool per KV block (split over the tensor parallel ranks' keys); the real "
     "size would be MiBs, this keeps pool segments small"),
    ("put-placement", str, "own",
     "where puts ask Mooncake to place replicas: 'own' (preferred_segment = this instance's segment, the guide's "
     "model: an instance's KV lands in its node's DRAM) or 'mooncake' (Mooncake's default placement)"),
]


def sim_env_name(name):
    return "KVPOOL_SIM_" + name.upper().replace("-", "_")


class StandinArgumentParser(argparse.ArgumentParser):
    """argparse with vLLM's FlexibleArgumentParser habit of accepting `--max_model_len` for `--max-model-len`."""

    def parse_args(self, args=None, namespace=None):  # noqa: D102
        if args is None:
            args = sys.argv[1:]
        fixed = []
        for arg in args:
            if arg.startswith("--") and not arg.startswith("--sim-"):
                if "=" in arg:
                    key, value = arg.split("=", 1)
                    fixed.append(key.replace("_", "-") + "=" + value)
                else:
                    fixed.append(arg.replace("_", "-"))
            else:
                fixed.append(arg)
        namespace, extras = self.parse_known_args(fixed, namespace)
        if extras:
            # vLLM's `serve` is a sub-command: argparse hands the leftovers to the top parser, which reports them
            build_top_parser().error("unrecognized arguments: %s" % " ".join(extras))
        return namespace


def human_readable_int(value):
    """vLLM's human_readable_int: 25600, 25.6k (x1000), 32K (x1024), 1m / 1M."""
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG]?)", text)
    if not match:
        raise argparse.ArgumentTypeError("Invalid number: %r" % value)
    number, unit = match.groups()
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[unit]
    if unit and unit.isupper() and "." in number:
        raise argparse.ArgumentTypeError("Decimals are not allowed with binary suffixes like %s: %r" % (unit, value))
    return int(float(number) * scale)


def max_model_len_type(value):
    if value.strip() in ("-1", "auto"):
        return -1
    return human_readable_int(value)


KV_ROLES = ("kv_producer", "kv_both", "kv_consumer")


def _pydantic_style(msg, kind, input_value):
    shown = input_value if len(input_value) <= 60 else input_value[:57] + "..."
    return "1 validation error for KVTransferConfig\n%s [type=%s, input_value=%r, input_type=str]" % (
        msg, kind, shown)


def kv_transfer_config_type(value):
    """--kv-transfer-config: vLLM validates it with pydantic (TypeAdapter(KVTransferConfig).validate_json)."""
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(_pydantic_style("  Invalid JSON: %s" % exc, "json_invalid", value)) from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(_pydantic_style(
            "  Input should be an object", "dataclass_type", value))
    role = data.get("kv_role")
    if role is not None and role not in KV_ROLES:
        raise argparse.ArgumentTypeError(
            "1 validation error for KVTransferConfig\nkv_role\n  Input should be 'kv_producer', 'kv_both' or "
            "'kv_consumer' [type=literal_error, input_value=%r, input_type=%s]" % (role, type(role).__name__))
    if data.get("kv_connector") is not None and role is None:
        raise argparse.ArgumentTypeError(
            "1 validation error for KVTransferConfig\n  Value error, Please specify kv_role when kv_connector is "
            "set, supported roles are ('kv_producer', 'kv_consumer', 'kv_both') [type=value_error]")
    extra = data.get("kv_connector_extra_config", {})
    if extra is not None and not isinstance(extra, dict):
        raise argparse.ArgumentTypeError(
            "1 validation error for KVTransferConfig\nkv_connector_extra_config\n  Input should be a valid "
            "dictionary [type=dict_type, input_value=%r, input_type=%s]" % (extra, type(extra).__name__))
    return data


def json_dict_type(value):
    try:
        data = json.loads(value)
    except ValueError as exc:
        msg = "Value %s cannot be converted to <function loads>. (%s)" % (value, exc)
        raise argparse.ArgumentTypeError(msg) from None
    return data


def build_serve_parser(prog="vllm serve"):
    version = version_tuple(emulated_version())
    parser = StandinArgumentParser(
        prog=prog,
        usage="vllm serve [model_tag] [options]",
        description="Launch a local OpenAI-compatible API server to serve LLM completions via HTTP. "
                    "[" + SIMULATED_NOTE + "]",
        epilog=EPILOG,
        allow_abbrev=True,
    )
    parser.add_argument("model_tag", nargs="?", default=None,
                        help="The model tag to serve (optional if specified in config) (default: None)")
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)

    frontend = parser.add_argument_group("Frontend")
    frontend.add_argument("--host", default=None, help="Host name. (default: None)")
    frontend.add_argument("--port", type=int, default=8000, help="Port number. (default: 8000)")
    frontend.add_argument("--api-key", nargs="+", default=None,
                          help="If provided, the server will require one of these keys to be presented in the "
                               "header. (default: None)")
    frontend.add_argument("--uvicorn-log-level", default="info",
                          choices=["critical", "debug", "error", "info", "trace", "warning"])
    frontend.add_argument("--disable-uvicorn-access-log", action="store_true", default=False)
    frontend.add_argument("--chat-template", default=None,
                          help="accepted; the stand-in always applies its fixed toy template")
    frontend.add_argument("--disable-log-stats", action="store_true", default=False)
    if version < (0, 12, 0):
        # removed in vLLM 0.12 (vllm-project/vllm#29402): later releases reject it as an unrecognized argument
        frontend.add_argument("--disable-log-requests", action="store_true", default=False,
                              help="[deprecated] Disable logging requests.")
    if version >= (0, 10, 0):
        frontend.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction, default=False)
    if version >= (0, 30, 0):
        # vLLM 0.30 gates the render (scale-out) endpoints off on plain `vllm serve` (vllm-project/vllm#55176)
        frontend.add_argument("--enable-scale-out", action="store_true", default=False)

    model = parser.add_argument_group("ModelConfig")
    model.add_argument("--served-model-name", nargs="+", default=None)
    model.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float", "float16", "float32", "half"])
    model.add_argument("--max-model-len", type=max_model_len_type, default=None)
    model.add_argument("--trust-remote-code", action=argparse.BooleanOptionalAction, default=False)
    model.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction, default=False)
    model.add_argument("--seed", type=int, default=None)
    model.add_argument("--tokenizer", default=None)
    model.add_argument("--quantization", "-q", default=None)
    model.add_argument("--max-logprobs", type=int, default=20)
    model.add_argument("--generation-config", default="auto")

    parallel = parser.add_argument_group("ParallelConfig")
    parallel.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parallel.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parallel.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    parallel.add_argument("--distributed-executor-backend", default=None,
                          choices=["external_launcher", "mp", "ray", "uni"])
    parallel.add_argument("--enable-expert-parallel", action=argparse.BooleanOptionalAction, default=False)

    cache = parser.add_argument_group("CacheConfig")
    cache.add_argument("--block-size", type=int, default=None)
    cache.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    cache.add_argument("--swap-space", type=float, default=4)
    cache.add_argument("--kv-cache-dtype", default="auto")
    cache.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)

    scheduler = parser.add_argument_group("SchedulerConfig")
    scheduler.add_argument("--max-num-batched-tokens", type=human_readable_int, default=None)
    scheduler.add_argument("--max-num-seqs", type=int, default=None)
    scheduler.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)

    vllm_config = parser.add_argument_group("VllmConfig")
    vllm_config.add_argument("--kv-transfer-config", type=kv_transfer_config_type, default=None,
                             help="The configurations for distributed KV cache transfer. Should either be a "
                                  "valid JSON string or JSON keys passed individually.")
    vllm_config.add_argument("--additional-config", type=json_dict_type, default=None,
                             help="Additional config for specified platform in JSON format (accepted, ignored).")

    sim = parser.add_argument_group(
        "simulation (SIMULATED stand-in only, not vLLM flags; each defaults from KVPOOL_SIM_<NAME>)")
    for name, typ, default, text in SIM_OPTIONS:
        env = sim_env_name(name)
        raw = os.environ.get(env)
        value = default
        if raw not in (None, ""):
            try:
                value = typ(raw)
            except ValueError:
                parser.error("environment %s=%r is not a valid %s" % (env, raw, typ.__name__))
        kwargs = {"type": typ, "default": value, "help": "%s (env %s, default %s)" % (text, env, default)}
        if name == "put-placement":
            kwargs["choices"] = ["own", "mooncake"]
        sim.add_argument("--sim-" + name, **kwargs)
    return parser


def build_top_parser():
    parser = StandinArgumentParser(
        prog="vllm",
        description="vLLM CLI [" + SIMULATED_NOTE + "]",
        epilog=EPILOG,
        allow_abbrev=False,
    )
    parser.add_argument("-v", "--version", action="version", version=reported_version())
    parser.add_argument("subparser", nargs="?", choices=["serve"], metavar="{serve}",
                        help="only `serve` is simulated")
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "serve":
        top = build_top_parser()
        top.parse_args(argv[:1])  # --version, --help, or an invalid subcommand error (exit 2)
        top.print_help()
        return 0
    args = build_serve_parser().parse_args(argv[1:])
    from .app import run  # late import: argparse errors must not need anything else

    return run(args, argv)
