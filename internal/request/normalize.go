// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package request recognises LLM engine request spans and normalises what
// each engine writes on them into one canonical set of attributes. Each
// engine has its own extractor (vllm.go, trtllm.go, sglang.go, tgi.go) that
// returns Figures; Normalize derives and writes the rest the same way for
// all of them.
package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"sort"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// CanonicalAttributes are the keys this processor writes on request spans.
var CanonicalAttributes = []string{
	names.AttrTimeToFirstToken, names.AttrE2E, names.AttrTimeInQueue, names.AttrTimeInPrefill,
	names.AttrTimeInDecode, names.AttrTimePerOutputTok, names.AttrTimeInOther, names.AttrBottleneck,
	names.AttrInputTokens, names.AttrOutputTokens, names.AttrProviderName, names.AttrRequestModel,
	names.AttrOperationName, names.AttrLoRAAdapter, names.AttrAnomaly, names.AttrErrorType,
	srcInference, AttrCacheRead, AttrDecodeQueue,
}

// Processed reports whether an earlier inference processor already wrote
// the canonical set, so a chain of collectors does not do it twice. Normalize
// does the same check itself; this is for spans looked at before it.
func Processed(attrs pcommon.Map) bool {
	// One walk rather than a Get (a walk) per key.
	found := false
	attrs.Range(func(k string, _ pcommon.Value) bool {
		switch k {
		case names.AttrTimeInOther, names.AttrBottleneck, names.AttrAnomaly:
			found = true
		}
		return !found
	})
	return found
}

// Scratch is Normalize's working memory. A caller that normalizes many spans
// passes the same one each time, which spares clearing it whole (it is over
// a kilobyte); it is not safe for concurrent use.
type Scratch struct {
	n      reader
	result Result
}

// reader returns the scratch reader, cleared of what a previous span left
// that fill does not overwrite. Values in snap.vals are left: they are read
// only where snap.has says fill set them.
func (sc *Scratch) reader(attrs pcommon.Map) *reader {
	n := &sc.n
	n.attrs = attrs
	n.anomalies = nil // Result.Anomalies keeps the previous span's
	sn := &n.snap
	sn.has = [numKeys]bool{}
	sn.failure = ""
	if sn.loraSeen != 0 {
		sn.lora = [maxLoRA]string{}
		sn.loraSeen = 0
	}
	return n
}

// Resource is what Normalize reads from a span's resource. It is the same
// for every span of the resource, so it is read once per resource rather
// than once per span.
type Resource struct {
	Engine string // names.ResourceEngineName, "" when absent
	Model  string // the first Settings.ModelResourceAttributes with a string value
	LoRA   string // the first Settings.LoRAAttributes with a string value
}

// ReadResource reads what Normalize needs from res.
func ReadResource(res pcommon.Resource, set *Settings) Resource {
	attrs := res.Attributes()
	return Resource{
		Engine: strAttr(attrs, names.ResourceEngineName),
		Model:  firstStr(attrs, set.ModelResourceAttributes),
		LoRA:   firstStr(attrs, set.LoRAAttributes),
	}
}

// firstStr returns the first non-empty string value among keys.
func firstStr(m pcommon.Map, keys []string) string {
	for _, k := range keys {
		if v := strAttr(m, k); v != "" {
			return v
		}
	}
	return ""
}

// Result is what Normalize did to one span.
type Result struct {
	// Processed: an earlier inference processor already wrote the canonical
	// set (see Processed), so Normalize left the span as it was and the
	// other fields are empty.
	Processed bool
	// Phases are where the phase spans go, when Settings.PhaseSpans.
	// Request: the span is a whole request (counted as one); false for
	// vLLM's llm_core, the engine half of a request whose API span counts.
	Request   bool
	Provider  string
	RequestID string   // gen_ai.request.id, "" when absent or not a string
	Anomalies []string // "<key>:<problem>" or a computed check, sorted
	Phases    Phases
	// Model is gen_ai.request.model as resolved; Tokens the token counts
	// (for cost and the agent assembly).
	Model  string
	Tokens Tokens
}

// Tokens are a request's token counts; Cached is part of In.
type Tokens struct {
	In, Out, Cached       int64
	HasIn, HasOut, HasCch bool
}

// extract runs kind's extractor.
func extract(kind Kind, n *reader, span ptrace.Span, q Queue, f *Figures) {
	switch kind {
	case KindVLLM:
		extractVLLM(n, span, f)
	case KindVLLMCore:
		journeyCore(n, span, f)
	case KindTensorRTLLM:
		extractTRT(n, span, f)
	case KindSGLangRoot:
		extractSGLang(n, span, q, f)
	case KindTGI:
		extractTGI(n, span, f)
	}
}

// Normalize writes the canonical attribute set on a request span of the
// given kind and returns what it found. Bad values are removed, never
// replaced, and listed in inferprof.anomaly. A span an earlier inference
// processor already handled is left alone; the check rides on the same walk
// of the attributes, so callers need not call Processed first. sc may be
// nil. The Result is sc's, valid until sc's next use.
func Normalize(kind Kind, span ptrace.Span, res *Resource, set *Settings, q Queue, sc *Scratch) *Result {
	attrs := span.Attributes()
	if sc == nil {
		sc = &Scratch{}
	}
	n := sc.reader(attrs)
	lk := &set.lora
	if !set.prepared {
		lk = &loraKeys{}
		*lk = loraKeysOf(set.LoRAAttributes)
	}
	n.snap.fill(attrs, set, lk)
	if sn := &n.snap; sn.has[kOther] || sn.has[kBottleneck] || sn.has[kAnomaly] {
		sc.result = Result{Processed: true}
		return &sc.result
	}

	var f Figures
	extract(kind, n, span, q, &f)

	// Time per output token: decode spread over the tokens after the first.
	tpot := figure{}
	if f.Decode.ok && f.Out.ok && f.Out.v >= 2 {
		tpot = figure{f.Decode.v / (f.Out.v - 1), true}
	}

	// The rest: e2e minus the engine's phases (tokenisation,
	// detokenisation, the frontend). The phases come from another clock than
	// e2e, so a small overshoot is skew and counts as zero.
	other := figure{}
	engine, engineOK := 0.0, false
	switch {
	case f.Prefill.ok && f.Decode.ok:
		engine, engineOK = f.Prefill.v+f.Decode.v, true
	case f.Inference.ok && kind == KindTGI:
		engine, engineOK = f.Inference.v, true
	}
	if f.E2E.ok && engineOK && (f.Queue.ok || f.QueueInPrefill) {
		used := engine
		if f.Queue.ok {
			used += f.Queue.v
		}
		rest := f.E2E.v - used
		switch {
		case rest >= 0:
			other = figure{rest, true}
		case -rest <= tolerance(f.E2E.v):
			other = figure{0, true}
		default:
			n.anomaly("phases_exceed_e2e")
		}
	}
	bneck := ""
	if f.Queue.ok && f.Prefill.ok && f.Decode.ok {
		bneck = bottleneck(f.Queue.v, f.Prefill.v, f.Decode.v, other)
	}

	sn := &n.snap
	provider := providerOf(kind, sn, res)
	model := modelOf(sn, res, set)
	// The resource's model is the served one, the name the server answers
	// with, so it is also the response model of a span that names none.
	respModel := ""
	if sn.str(kResponseModel) == "" {
		respModel = res.Model
	}
	lora := loraOf(kind, sn, attrs, res, set, model)
	op := ""
	if kind != KindVLLMCore {
		op = operationOf(kind, span, sn, set)
	}
	et := errorTypeOf(span, sn, f.ErrorType)

	// Grow the attribute slice once, by exactly the keys the span lacks,
	// rather than once per Put or by a guess.
	added := sn.lacks(kTTFT, f.TTFT.ok) + sn.lacks(kE2E, f.E2E.ok) + sn.lacks(kQueue, f.Queue.ok) +
		sn.lacks(kPrefill, f.Prefill.ok) + sn.lacks(kDecode, f.Decode.ok) + sn.lacks(kInputTokens, f.In.ok) +
		sn.lacks(kOutputTokens, f.Out.ok) + sn.lacks(kCacheRead, f.Cached.ok) + sn.lacks(kTPOT, tpot.ok) +
		sn.lacks(kOther, other.ok) + sn.lacks(kBottleneck, bneck != "") + sn.lacks(kProvider, provider != "") +
		sn.lacks(kRequestModel, model != "") + sn.lacks(kResponseModel, respModel != "") + sn.lacks(kLoRA, lora != "") + sn.lacks(kOperation, op != "") +
		sn.lacks(kErrorType, et != "") + sn.lacks(kInference, f.WriteInference) +
		sn.lacks(kDecodeQueue, f.DecodeQueue.ok) + sn.lacks(kAnomaly, len(n.anomalies) > 0)
	attrs.EnsureCapacity(attrs.Len() + added)

	putSeconds(attrs, sn, kTTFT, f.TTFT)
	putSeconds(attrs, sn, kE2E, f.E2E)
	putSeconds(attrs, sn, kQueue, f.Queue)
	putSeconds(attrs, sn, kPrefill, f.Prefill)
	putSeconds(attrs, sn, kDecode, f.Decode)
	putSeconds(attrs, sn, kDecodeQueue, f.DecodeQueue)
	if f.WriteInference {
		putSeconds(attrs, sn, kInference, f.Inference)
	}
	if f.In.ok {
		attrs.PutInt(names.AttrInputTokens, int64(f.In.v))
	}
	if f.Out.ok {
		attrs.PutInt(names.AttrOutputTokens, int64(f.Out.v))
	}
	if f.Cached.ok {
		attrs.PutInt(AttrCacheRead, int64(f.Cached.v))
	}
	if tpot.ok {
		attrs.PutDouble(names.AttrTimePerOutputTok, tpot.v)
	}
	if other.ok {
		attrs.PutDouble(names.AttrTimeInOther, other.v)
	}
	if bneck != "" {
		attrs.PutStr(names.AttrBottleneck, bneck)
	}
	putStr(attrs, sn, kProvider, provider)
	if model != "" {
		putStr(attrs, sn, kRequestModel, model)
	}
	if respModel != "" {
		putStr(attrs, sn, kResponseModel, respModel)
	}
	if sn.loraLive {
		// A LoRA key that is also one we write is read after our writes.
		lora = loraOf(kind, sn, attrs, res, set, model)
	}
	if lora != "" {
		putStr(attrs, sn, kLoRA, lora)
	}
	if op != "" {
		putStr(attrs, sn, kOperation, op)
	}
	if et != "" {
		putStr(attrs, sn, kErrorType, et)
	}

	r := &sc.result
	*r = Result{Request: kind != KindVLLMCore, Provider: provider, RequestID: sn.str(kRequestID), Model: model}
	r.Tokens = Tokens{
		In: int64(f.In.v), Out: int64(f.Out.v), Cached: int64(f.Cached.v),
		HasIn: f.In.ok, HasOut: f.Out.ok, HasCch: f.Cached.ok,
	}
	if set.PhaseSpans {
		r.Phases = f.place(span)
	}
	if len(n.anomalies) > 0 {
		sort.Strings(n.anomalies)
		attrs.PutStr(names.AttrAnomaly, strings.Join(n.anomalies, ","))
		r.Anomalies = n.anomalies
	}
	return r
}

func bottleneck(queue, prefill, decode float64, other figure) string {
	best, name := queue, "queue"
	if prefill > best {
		best, name = prefill, "prefill"
	}
	if decode > best {
		best, name = decode, "decode"
	}
	if other.ok && other.v > best {
		name = "other"
	}
	return name
}

// putSeconds writes a latency unless the span already holds exactly that
// double under the key (the engine's own figure), saving a map scan.
func putSeconds(m pcommon.Map, sn *snapshot, i int, f figure) {
	if !f.ok {
		return
	}
	if v, ok := sn.get(i); ok && v.typ == pcommon.ValueTypeDouble && v.d == f.v {
		return
	}
	m.PutDouble(keyNames[i], f.v)
}

// putStr writes a string unless the span already has exactly that value,
// which saves the map scan a Put does.
func putStr(attrs pcommon.Map, sn *snapshot, i int, val string) {
	if sn.str(i) != val {
		attrs.PutStr(keyNames[i], val)
	}
}

func providerOf(kind Kind, sn *snapshot, res *Resource) string {
	if p := sn.str(kProvider); p != "" {
		return p
	}
	if p := sn.str(kSystem); p != "" {
		return p
	}
	if res.Engine != "" {
		return res.Engine
	}
	return kind.Provider()
}

func modelOf(sn *snapshot, res *Resource, set *Settings) string {
	if m := sn.str(kRequestModel); m != "" {
		return m
	}
	if m := sn.str(kResponseModel); m != "" {
		return m
	}
	if res.Model != "" {
		return res.Model
	}
	return set.DefaultModel
}

func loraOf(kind Kind, sn *snapshot, attrs pcommon.Map, res *Resource, set *Settings, model string) string {
	if l := sn.str(kLoRA); l != "" {
		return l
	}
	for j, k := range set.LoRAAttributes {
		var l string
		if j < maxLoRA && sn.loras.live&(1<<j) == 0 {
			l = sn.lora[j]
		} else {
			l = strAttr(attrs, k)
		}
		if l != "" {
			return l
		}
	}
	if kind == KindTGI {
		// TGI sets adapter_id from the request's model field unless it is
		// "tgi" (server.rs), so an ordinary request names the served model
		// there. Only a name that differs from the served model is an
		// adapter, and without a known served model nothing can be said.
		if l := tgiAdapter(sn.str(kTGIParameters)); l != "" && model != "" && l != model {
			return l
		}
	}
	return res.LoRA
}

// operationOf keeps an operation name the span already has, then reads the
// API from TGI's span name or from an OpenAI-style request id prefix.
func operationOf(kind Kind, span ptrace.Span, sn *snapshot, set *Settings) string {
	if op := sn.str(kOperation); op != "" {
		return op
	}
	if kind == KindTGI {
		return tgiSpans[span.Name()]
	}
	id := sn.str(kRequestID)
	switch {
	case strings.HasPrefix(id, "chatcmpl-"):
		return "chat"
	case strings.HasPrefix(id, "cmpl-"):
		return "text_completion"
	case strings.HasPrefix(id, "embd-"):
		return "embeddings"
	}
	return set.OperationName
}

// errorTypeOf keeps error.type if present. A span with status Error gets the
// type of its exception event, else a failing finish reason, else what the
// span's shape says, else "_OTHER" (semconv's fallback). A span whose status
// is not Error gets the failing finish reason (abort, cancelled, error,
// timeout) or what its shape says.
func errorTypeOf(span ptrace.Span, sn *snapshot, shape string) string {
	if et := sn.str(kErrorType); et != "" {
		return et
	}
	if span.Status().Code() == ptrace.StatusCodeError {
		evs := span.Events()
		for i := 0; i < evs.Len(); i++ {
			if evs.At(i).Name() == "exception" {
				if t := strAttr(evs.At(i).Attributes(), "exception.type"); t != "" {
					return t
				}
			}
		}
		if sn.failure != "" {
			return sn.failure
		}
		if shape != "" {
			return shape
		}
		return names.ErrorTypeOther
	}
	if sn.failure != "" {
		return sn.failure
	}
	return shape
}
