# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Writes a tiny Llama-architecture model folder for the vLLM e2e run.

Nothing comes from a model hub: config.json is written here, and the
tokenizer is a word-level one trained on generated text. vLLM serves it with
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


def words(n=600, seed=7):
    """The vocabulary: made-up words, so that an output text is nothing a
    collector would write by itself (the privacy check looks for them)."""
    rng = random.Random(seed)
    cons, vow = "bdfgklmnprstvz", "aeiou"
    out = []
    seen = set()
    while len(out) < n:
        w = "".join(rng.choice(cons) + rng.choice(vow) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def corpus(vocab, n=2000, seed=7):
    rng = random.Random(seed)
    yield " ".join(vocab)  # every word at least once
    for _ in range(n):
        yield " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 24)))


def main(out):
    os.makedirs(out, exist_ok=True)
    # A word-level tokenizer: every token decodes to a whole word, so each
    # streamed token is a non-empty chunk and the client's chunk gaps are
    # token gaps (byte-level BPE on random weights yields partial UTF-8
    # that the detokenizer holds back).
    special = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    trainer = trainers.WordLevelTrainer(vocab_size=VOCAB, special_tokens=special, min_frequency=1)
    tok.train_from_iterator(corpus(words()), trainer=trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>", "eos_token": "</s>", "pad_token": "</s>", "unk_token": "<unk>",
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
