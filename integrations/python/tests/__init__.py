# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
