"""SIMULATED vLLM / vllm-ascend stand-in for the ascend.kvpool mock Atlas nodes (test equipment).

`vllm serve` with the real command line, start-time checks and HTTP surface, but no model and no NPU:
tokens come from a toy whitespace tokenizer, generated text is filler, and prefill / decode / pool-load
*times* are a documented simulation (tests/mock/vllm/README.md). What is real: the Mooncake store client
(`mooncake.store.MooncakeDistributedStore`, configured from MOONCAKE_CONFIG_PATH as vllm-ascend does),
every KV block put/exist/get through the real pool, vLLM v1's chained block hashing seeded by
PYTHONHASHSEED, and the token counting of vLLM's prefix-cache metrics.
"""

import os

SIMULATED_NOTE = (
    "SIMULATED vLLM stand-in (ascend.kvpool tests/mock/vllm): no model, no NPU; "
    "prefill/decode/pool-load times are simulated, Mooncake KV pool traffic is real"
)

# The vLLM (and vllm-ascend) release whose behaviour is emulated. The seed guide's image is vllm-ascend
# v0.22.1rc1 on vLLM 0.22.1. Version-dependent behaviour: flags that exist only in some releases,
# the AscendStoreConnector name (v0.12+) and its deprecation warning for the old name (v0.13+).
DEFAULT_EMULATED_VERSION = "0.22.1"


def emulated_version():
    return os.environ.get("KVPOOL_SIM_VLLM_VERSION", DEFAULT_EMULATED_VERSION)


def version_tuple(text):
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
        if len(parts) == 3:
            break
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def reported_version():
    """What `vllm --version` and GET /version print: the emulated version, labelled `+sim` (PEP 440 local)."""
    return emulated_version().split("+")[0] + "+sim"
