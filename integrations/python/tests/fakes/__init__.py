"""Fake vLLM and SGLang engines for the hook tests and the e2e test."""
