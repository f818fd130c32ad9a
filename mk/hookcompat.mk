# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# The engine step hook against every vLLM release it claims (issue 25):
# its patch table (integrations/python/inferprof_hook/points.py) checked
# against each release's sdist, read with ast (nothing installed), and the
# fakes against the release each cites. The sdists come from PyPI once and
# are kept, trimmed to their Python files, under ~/.cache/inferprof/.
#  - hook-compat: fails when docs/compatibility.md's generated table is
#    stale, when the newest release would leave the hook off, or when a fake
#    disagrees with its release.
#  - hook-compat-docs: rewrites that table.
#  - hook-compat-real: the table and two hooked steps on the real vLLM
#    classes, in the virtualenv make e2e-vllm builds (skipped, with the
#    reason, without one; test-python runs the same test when it exists).

HOOK_COMPAT := python3 integrations/python/tools/hook_compat.py

.PHONY: hook-compat hook-compat-docs hook-compat-real
TEST_TARGETS += hook-compat

hook-compat:
	$(HOOK_COMPAT) --check -q
	$(HOOK_COMPAT) --fakes
	cd integrations/python && python3 -m unittest tests.test_hook_compat

hook-compat-docs:
	$(HOOK_COMPAT)

hook-compat-real:
	cd integrations/python && python3 -m unittest -v tests.test_real_vllm
