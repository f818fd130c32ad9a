# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake of the vllm.v1.worker package."""
