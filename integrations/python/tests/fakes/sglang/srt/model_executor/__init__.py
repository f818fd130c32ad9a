"""Fake of the sglang.srt.model_executor package."""
