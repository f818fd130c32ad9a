"""Fake of the sglang.srt package."""
