"""Fake of the vllm.v1.core package."""
