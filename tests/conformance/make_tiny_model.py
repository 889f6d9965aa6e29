"""Build the tiny model the real vLLM engine (CPU build) serves in tests/conformance/ - TEST EQUIPMENT.

No hub access: a Qwen2 architecture with random weights (hidden 128, 2 layers, 4 heads, vocab 4096) and a BPE
tokenizer trained with `tokenizers` on local text (this Python's own standard library sources), plus a chat
template of Qwen's shape. About 4 MB, built in seconds. Its answers are noise; only the engine's behaviour
(flags, HTTP, metrics, SSE) is under test. Run with the conformance venv's Python:

    python make_tiny_model.py DIR
"""
import glob
import json
import os
import sys
import sysconfig

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def local_text(limit=4 << 20):
    """Up to ``limit`` bytes of this Python's standard library sources."""
    total = 0
    for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        total += len(text)
        yield text
        if total > limit:
            return


def main(out):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    os.makedirs(out, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=4096, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(local_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, max_position_embeddings=8192, vocab_size=4096,
                         eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
                         bos_token_id=fast.convert_tokens_to_ids("<|endoftext|>"), tie_word_embeddings=True,
                         torch_dtype="float32")
    Qwen2ForCausalLM(config).save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "TEST-EQUIPMENT.json"), "w") as handle:
        json.dump({"what": "tiny random Qwen2 for the real vLLM engine (CPU build), test equipment",
                   "built_by": "tests/conformance/make_tiny_model.py"}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
