// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

// Settings are the inputs that come from configuration.
type Settings struct {
	ModelResourceAttributes []string
	DefaultModel            string
	LoRAAttributes          []string
	OperationName           string
	// PhaseSpans: place the phases in Result.Phases (phase_spans).
	PhaseSpans bool

	// Set by Prepare.
	lora     loraKeys
	prepared bool
}

// Prepare works out once what Normalize would otherwise work out for every
// span from LoRAAttributes. Call it after setting the fields, before
// Normalize; without it Normalize works it out each time.
func (s *Settings) Prepare() {
	s.lora = loraKeysOf(s.LoRAAttributes)
	s.prepared = true
}

// liveKey reports whether a LoRA key is one the snapshot does not copy for
// LoRA, so it is read from the span itself.
func liveKey(k string) bool {
	return keyIndex(k) >= 0
}

// loraKeys is what fill and loraOf need to know of Settings.LoRAAttributes,
// worked out once (Settings.Prepare) rather than for every span.
type loraKeys struct {
	// live has bit j set when LoRA key j is live (liveKey); any is set
	// when one is.
	live uint8
	any  bool
	// lens has bit n set when a LoRA key the snapshot copies has length n
	// (n < 64); long is set when one is longer. A key of any other length
	// is no LoRA key, which spares the comparisons for most keys.
	lens uint64
	long bool
}

func loraKeysOf(keys []string) loraKeys {
	var lk loraKeys
	for j, k := range keys {
		if liveKey(k) {
			lk.any = true
			if j < maxLoRA {
				lk.live |= 1 << j
			}
			continue
		}
		if j >= maxLoRA {
			continue
		}
		if len(k) < 64 {
			lk.lens |= 1 << len(k)
		} else {
			lk.long = true
		}
	}
	return lk
}

// maybeLoRA reports whether a key of this length may be a LoRA key the
// snapshot copies.
func (lk *loraKeys) maybeLoRA(k string) bool {
	if len(k) < 64 {
		return lk.lens&(1<<len(k)) != 0
	}
	return lk.long
}

// maxLoRA is how many LoRA keys the snapshot copies; the rest are read from
// the span.
const maxLoRA = 8
