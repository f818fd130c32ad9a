#!/bin/sh
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# Copies config/agent.yaml and config/gateway.yaml into the deploy files that
# embed them (`make deploy-configs`); e2e/deploy_test.go fails until they match.
set -eu
cd "$(dirname "$0")/.."

# embed_cm FILE KEY CONFIG: the ConfigMap data key KEY (a block scalar that
# runs to the next "---") becomes CONFIG, indented four spaces.
embed_cm() {
	awk -v key="  $2: |" -v cfg="$3" '
		$0 == key { print; while ((getline line < cfg) > 0) print (line == "" ? "" : "    " line); skip = 1; next }
		skip && $0 == "---" { skip = 0 }
		!skip { print }
	' "$1" > "$1.tmp" && mv "$1.tmp" "$1"
}

# embed_values FILE CONFIG: everything after "alternateConfig:" becomes
# CONFIG without its licence header, indented two spaces.
embed_values() {
	awk -v cfg="$2" '
		{ print }
		$0 == "alternateConfig:" {
			head = 1
			while ((getline line < cfg) > 0) {
				if (head && line ~ /^# (Copyright|SPDX)/) continue
				head = 0
				print (line == "" ? "" : "  " line)
			}
			exit
		}
	' "$1" > "$1.tmp" && mv "$1.tmp" "$1"
}

embed_cm deploy/manifests/agent-daemonset.yaml agent.yaml config/agent.yaml
embed_cm deploy/manifests/gateway.yaml gateway.yaml config/gateway.yaml
embed_values deploy/helm/agent-values.yaml config/agent.yaml
embed_values deploy/helm/gateway-values.yaml config/gateway.yaml
