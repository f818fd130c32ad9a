// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

// xidMeanings names the XID codes an operator most often meets on data-centre GPUs, from NVIDIA's
// "XID Errors" catalogue (docs.nvidia.com/deploy/xid-errors). Other codes are reported by number.
var xidMeanings = map[uint64]string{
	13:  "Graphics Engine Exception (often an out-of-bounds access in a kernel)",
	31:  "GPU memory page fault (often an illegal address in a kernel)",
	43:  "GPU stopped processing (a user application faulted)",
	45:  "Preemptive cleanup after an earlier error",
	48:  "Double-bit ECC error (uncorrectable; the GPU needs a reset)",
	63:  "ECC page retirement or row remapping recorded",
	64:  "ECC page retirement or row remapping failed",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "High single-bit ECC error rate",
	94:  "Contained ECC error (the application must restart)",
	95:  "Uncontained ECC error (the GPU needs a reset)",
	119: "GSP RPC timeout",
	120: "GSP error",
}

// xidMeaning returns the meaning of an XID code, or "" for codes outside the table.
func xidMeaning(code uint64) string { return xidMeanings[code] }
