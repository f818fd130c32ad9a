# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Writes a tiny Llama-architecture model folder for the vLLM e2e run.

Nothing comes from a model hub: config.json is written here, and the
tokenizer is a byte-level BPE trained on generated text. vLLM serves it with
--load-format dummy (random weights), so the outputs mean nothing; the load
driver sets ignore_eos so completion lengths are what max_tokens asks for.

Usage: python make_model.py OUT_DIR
"""

import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

NAME = "tiny-llama"
VOCAB = 1024

# The chat template renders role and content only; it is what vLLM's chat
# endpoint applies before tokenising.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def corpus(n=4000, seed=7):
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "kernel", "token", "batch", "step",
             "queue", "decode", "prefill", "cache", "block", "layer", "model", "engine",
             "stream", "chunk", "latency", "profile", "user", "assistant", "system"]
    for _ in range(n):
        yield " ".join(rng.choice(words) for _ in range(rng.randint(4, 24)))


def main(out):
    os.makedirs(out, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>", "eos_token": "</s>", "pad_token": "</s>",
            "model_max_length": 2048, "add_bos_token": False,
            "chat_template": CHAT_TEMPLATE,
        }, f, indent=1)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "pad_token": "</s>"}, f)
    # head_dim 64: vLLM's CPU attention (cpu_attn.py) refuses 16
    # ("Unsupported CPU attention configuration").
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": vocab, "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 64, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "bos_token_id": tok.token_to_id("<s>"), "eos_token_id": tok.token_to_id("</s>"),
        "torch_dtype": "bfloat16",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, f)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tiny-llama")
