# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The tiny model of e2e/vllm/make_model.py with a byte-level tokenizer.

The vLLM run's word-level tokenizer has only made-up words, so no token
spells `{` or `"`: structured outputs (tool_choice="required") have nothing
to build a tool call's JSON from. A byte-level BPE can spell any text, so
vLLM's grammar can force the tool call out of the random weights.

Usage: python make_model.py OUT_DIR
"""

import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vllm"))
import make_model as base  # noqa: E402


def main(out):
    base.main(out)
    special = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=base.VOCAB, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    text = list(base.corpus(base.words()))
    text += ['[{"name": "get_weather", "parameters": {"city": "paris"}}]',
             '{"city": "tokyo"}'] * 20
    tok.train_from_iterator(text, trainer=trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    path = os.path.join(out, "config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(vocab_size=tok.get_vocab_size(), bos_token_id=tok.token_to_id("<s>"),
                  eos_token_id=tok.token_to_id("</s>"))
    with open(path, "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, f)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tiny-llama")
