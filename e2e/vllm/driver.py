# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Load driver for the vLLM e2e run, on the real openai client.

Streams chat and completion requests at the concurrencies asked, with mixed
prompt lengths and max_tokens, prompts that share prefixes (so prefix caching
hits), and some streams closed after a few chunks (aborts). Per request it
records the send time, every chunk's arrival and the API's usage, as one JSON
object a line. Times are time.time() (the same clock vLLM stamps arrival
with), taken with perf_counter offsets so they are monotonic within a run.

Usage: python driver.py --base-url URL --model NAME --out FILE
       [--concurrency 1,8,32] [--requests-per-level 8,24,64] [--seed N] [--bench | --abort]
"""

import argparse
import asyncio
import json
import random
import sys
import time

import openai

from make_model import words

# Words for the prompts: the tiny model's vocabulary, so every word is one
# token and prompts that share words share tokens. Each prompt also carries
# a marker made for this run (PRIVACY_MARK + request number): the privacy
# check looks for it in every collector output.
WORDS = words()
PRIVACY_MARK = "zqxsecret"
# Shared prefixes: long enough to fill whole KV blocks (vLLM CPU: 128 tokens
# a block by default, so several hundred words), so later requests hit.
PREFIXES = 3
MAX_TOKENS = [4, 9, 16, 33]
ABORT_AFTER_CHUNKS = 3   # an aborted stream is closed after this many content chunks
ABORT_MAX_TOKENS = 1300


class Clock:
    """time.time() at start plus perf_counter since: monotonic, wall-based."""

    def __init__(self):
        self.wall0 = time.time()
        self.perf0 = time.perf_counter()

    def now(self):
        return self.wall0 + (time.perf_counter() - self.perf0)


def plan(levels, counts, seed, bench=False, abort=False):
    """The requests, in order, for every concurrency level. bench: one
    max_tokens, so runs compare token for token. abort: every stream is
    closed after ABORT_AFTER_CHUNKS chunks (run.py runs the aborts as a
    phase of their own, so the histograms of the finished requests can be
    compared with vLLM's for exactly the same requests)."""
    rng = random.Random(seed)
    prefixes = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(300, 500)))
                for _ in range(PREFIXES)]
    reqs = []
    n = 1000 if abort else 0
    for level, count in zip(levels, counts):
        for i in range(count):
            n += 1
            body = " ".join(rng.choice(WORDS) for _ in range(rng.choice([3, 20, 120])))
            shared = rng.random() < 0.6
            prompt = (prefixes[rng.randrange(PREFIXES)] + " " if shared else "") + \
                f"{PRIVACY_MARK}{n:04d} {body}"
            reqs.append({
                "n": n, "level": level,
                "api": "chat" if n % 2 else "completion",
                "prompt": prompt,
                # An aborted stream asks for many tokens, so the engine is still
                # generating when the client closes. 400 was not enough: in
                # one CI run the API server stalled 1.7 s with the first
                # chunks in hand while the engine made all 400. The longest
                # prompt (~630 tokens) plus this stays under --max-model-len.
                "max_tokens": 32 if bench else ABORT_MAX_TOKENS if abort else rng.choice(MAX_TOKENS),
                "abort": abort,
            })
    return reqs


async def one(client, model, req, clock):
    rec = {k: req[k] for k in ("n", "level", "api", "max_tokens", "abort")}
    rec["mark"] = f"{PRIVACY_MARK}{req['n']:04d}"
    # Random weights: ignore_eos makes lengths max_tokens, and special
    # tokens are written out, so each token is one non-empty chunk.
    extra = {"ignore_eos": True, "skip_special_tokens": False}
    opts = {"stream_options": {"include_usage": True}}
    rec["send"] = clock.now()
    chunks, text, usage, rid = [], [], None, None
    try:
        if req["api"] == "chat":
            stream = await client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": req["prompt"]}],
                max_tokens=req["max_tokens"], stream=True, temperature=0.8,
                extra_body=extra, **opts)
        else:
            stream = await client.completions.create(
                model=model, prompt=req["prompt"], max_tokens=req["max_tokens"],
                stream=True, temperature=0.8, extra_body=extra, **opts)
        content = 0
        async for chunk in stream:
            t = clock.now()
            rid = rid or chunk.id
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
            if chunk.choices:
                c = chunk.choices[0]
                piece = c.delta.content if req["api"] == "chat" else c.text
                if piece:
                    content += 1
                    chunks.append(t)
                    text.append(piece)
            if req["abort"] and content >= ABORT_AFTER_CHUNKS:
                await stream.close()
                break
        rec["end"] = clock.now()
    except openai.APIError as e:
        rec["error"] = type(e).__name__
        rec["end"] = clock.now()
    rec["id"] = rid
    rec["chunks"] = chunks
    rec["usage"] = usage
    rec["text"] = "".join(text)
    return rec


async def level_run(client, model, reqs, level, clock):
    sem = asyncio.Semaphore(level)

    async def guarded(r):
        async with sem:
            return await one(client, model, r, clock)

    return await asyncio.gather(*(guarded(r) for r in reqs))


async def main_async(args):
    levels = [int(x) for x in args.concurrency.split(",")]
    counts = [int(x) for x in args.requests_per_level.split(",")]
    reqs = plan(levels, counts, args.seed, args.bench, args.abort)
    clock = Clock()
    client = openai.AsyncOpenAI(base_url=args.base_url, api_key="none",
                                max_retries=0, timeout=args.timeout)
    out = []
    for level in levels:
        batch = [r for r in reqs if r["level"] == level]
        t0 = clock.now()
        recs = await level_run(client, args.model, batch, level, clock)
        out.extend(recs)
        print(f"driver: concurrency {level}: {len(recs)} requests in "
              f"{clock.now() - t0:.1f}s", file=sys.stderr)
    await client.close()
    with open(args.out, "a") as f:
        for r in out:
            f.write(json.dumps(r) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--requests-per-level", default="8,24,64")
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--bench", action="store_true", help="max_tokens 32 (make bench-engine)")
    p.add_argument("--abort", action="store_true", help="close every stream mid-way")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
