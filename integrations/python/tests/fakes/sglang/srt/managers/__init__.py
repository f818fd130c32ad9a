"""Fake of the sglang.srt.managers package."""
