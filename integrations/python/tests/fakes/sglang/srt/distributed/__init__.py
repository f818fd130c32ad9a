"""Fake of the sglang.srt.distributed package."""
