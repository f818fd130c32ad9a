# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake of the sglang.srt.model_executor package."""
