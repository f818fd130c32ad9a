"""Fake of the sglang.srt.layers package."""
