# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Fake SGLang runtime, shaped like sgl-project/sglang; each module names the file and commit it follows."""
