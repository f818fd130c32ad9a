// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"strings"
)

// attrModelName is the resource attribute the inference processor reads the
// served model from when a request span names none (vLLM's default spans do
// not); docs/names.md.
const attrModelName = "inferprof.model.name"

// servedModel reads the model the engine serves from its command line: the
// first --served-model-name (what clients send as "model"), else --model or
// SGLang's --model-path, else vLLM's positional `vllm serve MODEL`. "" when
// none is given.
func servedModel(args []string) string {
	var served, model, positional string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "--served-model-name", "--model", "--model-path":
			if !hasVal {
				if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
					continue
				}
				i++
				val = args[i]
			}
			if name == "--served-model-name" {
				if served == "" {
					served = val
				}
			} else if model == "" {
				model = val
			}
		case "serve":
			// vllm serve MODEL: the positional right after serve.
			if positional == "" && i > 0 && strings.HasPrefix(baseName(args[i-1]), "vllm") &&
				i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				positional = args[i+1]
			}
		}
	}
	switch {
	case served != "":
		return served
	case model != "":
		return model
	}
	return positional
}

func baseName(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// withModel returns attrs (an OTEL_RESOURCE_ATTRIBUTES value) with
// inferprof.model.name=model appended, unless attrs names one already.
func withModel(attrs, model string) (string, bool) {
	if model == "" || resourceAttribute(attrs, attrModelName) != "" {
		return attrs, false
	}
	add := attrModelName + "=" + escapeResourceValue(model)
	if strings.TrimSpace(attrs) == "" {
		return add, true
	}
	return attrs + "," + add, true
}

// escapeResourceValue percent-encodes what would split or corrupt an
// OTEL_RESOURCE_ATTRIBUTES item (the SDKs percent-decode values); a model
// path's slashes stay readable.
func escapeResourceValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ',' || c == '=' || c == '%' || c <= ' ' || c >= 0x7f {
			b.WriteString("%")
			b.WriteString(strings.ToUpper(string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// planResource puts this launch's service.instance.id and the served model
// in OTEL_RESOURCE_ATTRIBUTES, keeping what the user set, in one change.
func planResource(p *plan, args []string) {
	v, withID := withInstanceID(p.vars[envResourceAttrs], newInstanceID)
	v, withName := withModel(v, servedModel(args))
	var why []string
	if withID {
		why = append(why, "names this server's instance (service.instance.id) for its request spans, its engine steps and its GPU kernels alike")
	}
	if withName {
		why = append(why, "names the served model ("+attrModelName+") for request spans that carry none, as vLLM's do")
	}
	if len(why) > 0 {
		p.set(envResourceAttrs, v, strings.Join(why, "; "))
	}
}

// engineName guesses vllm or sglang from the command line ("vllm serve",
// "python3 -m sglang.launch_server"); "" when neither appears.
func engineName(args []string) string {
	for _, a := range args {
		base := filepath.Base(a)
		for _, e := range []string{"vllm", "sglang"} {
			if strings.HasPrefix(base, e) {
				return e
			}
		}
	}
	return ""
}
