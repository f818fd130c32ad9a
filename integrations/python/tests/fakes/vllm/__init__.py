# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake vLLM v1 engine, shaped like vllm-project/vllm; each module names the file and commit it follows."""
