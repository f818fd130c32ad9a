"""Fake of the vllm.v1 package."""
