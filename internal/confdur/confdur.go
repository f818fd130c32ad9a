// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package confdur checks the durations of our components' configurations: a
// minimum for each interval and timeout, and errors that name the value.
package confdur // import "github.com/inferprof/inferprof/internal/confdur"

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

// Min returns an error when d is set (non-zero) and below minimum. A bare
// number in YAML (15, not 15s) decodes as that many nanoseconds, so a value
// under a millisecond gets a hint to add a unit.
func Min(key string, d, minimum time.Duration) error {
	if d == 0 || d >= minimum {
		return nil
	}
	if d > 0 && d < time.Millisecond {
		return fmt.Errorf("%s: %s is below the minimum of %s; did you forget a unit, e.g. %ds?", key, d, minimum, int64(d))
	}
	return fmt.Errorf("%s: %s is below the minimum of %s", key, d, minimum)
}

// Unmarshal decodes conf into cfg, as the collector would. When decoding
// fails on a duration, the collector's error names the key but not the value
// ("'metrics_flush_interval' time: invalid duration"); the returned error
// adds each such key's value. Only keys whose error says duration are
// quoted, so no other setting (an API key) is ever echoed.
func Unmarshal(conf *confmap.Conf, cfg any) error {
	err := conf.Unmarshal(cfg)
	if err == nil {
		return nil
	}
	msg := err.Error()
	var notes []string
	for path, v := range leaves("", conf.ToStringMap()) {
		dotted := strings.ReplaceAll(path, "::", ".")
		seg := dotted[strings.LastIndex(dotted, ".")+1:]
		for _, q := range []string{"'" + dotted + "'", "'" + seg + "'"} {
			// "time: " opens every time.ParseDuration error (invalid
			// duration, missing unit, unknown unit).
			if strings.Contains(msg, q+" time: ") || strings.Contains(msg, q+" expected type 'time.Duration'") {
				notes = append(notes, fmt.Sprintf("%s: %#v is not a duration; write a number with a unit, e.g. 15s or 500ms", dotted, v))
				break
			}
		}
	}
	if len(notes) == 0 {
		return err
	}
	sort.Strings(notes)
	return errors.Join(err, errors.New(strings.Join(notes, "\n")))
}

func leaves(prefix string, m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		p := k
		if prefix != "" {
			p = prefix + "::" + k
		}
		if sub, ok := v.(map[string]any); ok {
			for kk, vv := range leaves(p, sub) {
				out[kk] = vv
			}
			continue
		}
		out[p] = v
	}
	return out
}
