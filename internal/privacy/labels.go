// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy // import "github.com/inferprof/inferprof/internal/privacy"

import "regexp"

// LabelResourceAttributes is the one list of resource attributes that may
// become labels: Prometheus target_info (through the shipped configs'
// transform/labels, which must hold this exact expression; a test checks
// them) and Graphsignal tags (the graphsignal exporter, through
// IsLabelResourceAttribute). It names what identifies the thing measured;
// an unknown attribute, an application's own or a JSON blob, is no label
// (issue #30).
const LabelResourceAttributes = `^(service\.(name|namespace|instance\.id|version)|host\.(name|id|arch)|os\.(type|version)|process\.(pid|parent_pid|creation\.time|runtime\.(name|version))|container\.(id|name)|k8s\.[a-z_.]+\.(name|uid)|cloud\.(provider|region|availability_zone|platform)|deployment\.environment(\.name)?|(hw|nvidia|gpu|inferprof)\.[a-z0-9_.]+|telemetry\.sdk\.(name|language|version))$`

var labelResource = regexp.MustCompile(LabelResourceAttributes)

// IsLabelResourceAttribute reports whether a resource attribute may become
// a label.
func IsLabelResourceAttribute(key string) bool { return labelResource.MatchString(key) }
