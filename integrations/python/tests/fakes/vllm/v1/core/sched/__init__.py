"""Fake of the vllm.v1.core.sched package."""
