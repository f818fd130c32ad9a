// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package request recognises LLM engine request spans and normalises what
// each engine writes on them into one canonical set of attributes.
package request // import "github.com/inferprof/inferprof/processor/inferenceprocessor/internal/request"

import (
	"math"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/redact"
)

// Kind says what a span is to this processor.
type Kind int

const (
	// KindNone is any span the processor leaves alone (apart from privacy).
	KindNone Kind = iota
	// KindVLLM is vLLM's llm_request span.
	KindVLLM
	// KindTensorRTLLM is a TensorRT-LLM request span (vLLM's attribute names).
	KindTensorRTLLM
	// KindSGLangRoot is SGLang's root "{role} Req {rid}" span.
	KindSGLangRoot
	// KindSGLangStage is an SGLang stage (slice) span such as prefill_waiting.
	KindSGLangStage
	// KindTGI is a TGI router span (generate, generate_stream, ...).
	KindTGI
)

// Provider returns the gen_ai.provider.name an engine kind implies.
func (k Kind) Provider() string {
	switch k {
	case KindVLLM:
		return names.ProviderVLLM
	case KindTensorRTLLM:
		return names.ProviderTensorRTLLM
	case KindSGLangRoot, KindSGLangStage:
		return names.ProviderSGLang
	case KindTGI:
		return names.ProviderTGI
	}
	return ""
}

// Source attribute keys written by the engines (see the reference notes).
const (
	srcPromptTokens     = "gen_ai.usage.prompt_tokens"
	srcCompletionTokens = "gen_ai.usage.completion_tokens"
	srcInference        = "gen_ai.latency.time_in_model_inference"
	srcResponseModel    = "gen_ai.response.model"
	srcFinishReasons    = "gen_ai.response.finish_reasons"
	srcSystem           = "gen_ai.system"
	srcKVTransfer       = "gen_ai.latency.kv_cache_transfer_time"

	tgiTotal      = "total_time"
	tgiQueue      = "queue_time"
	tgiInference  = "inference_time"
	tgiValidation = "validation_time"
	tgiPerToken   = "time_per_token"
	tgiParameters = "parameters"
)

// Stage span names SGLang uses for queueing; their durations are the
// request's queue time (SGLang's own prefill figure includes it).
const (
	StagePrefillWaiting = "prefill_waiting"
	StageDecodeWaiting  = "decode_waiting"
)

// sglangStages are SGLang's stage (slice) span names, all trace levels.
var sglangStages = map[string]bool{
	"tokenize": true, "dispatch": true, "dc_dispatch": true, "request_process": true,
	StagePrefillWaiting: true, "prefill_forward": true, "chunked_prefill": true,
	"decode_forward": true, "decode_loop": true, "prefill_prepare": true,
	"prefill_bootstrap": true, "prefill_transfer_kv_cache": true, "decode_prepare": true,
	"decode_bootstrap": true, StageDecodeWaiting: true, "decode_transferred": true,
	"quick_finish": true, "fake_output": true, "mini_lb_launch": true, "wait_pd_finish": true,
}

// tgiSpans are TGI router span names for one request.
var tgiSpans = map[string]string{
	"generate":         "text_completion",
	"generate_stream":  "text_completion",
	"completions":      "text_completion",
	"chat_completions": "chat",
}

// trtEvents are span events only TensorRT-LLM writes on its request span.
var trtEvents = map[string]bool{
	"kv_cache_transfer_start": true, "kv_cache_transfer_end": true,
	"ctx_server.selected": true, "gen_server.selected": true,
}

// CanonicalAttributes are the keys this processor writes on request spans.
var CanonicalAttributes = []string{
	names.AttrTimeToFirstToken, names.AttrE2E, names.AttrTimeInQueue, names.AttrTimeInPrefill,
	names.AttrTimeInDecode, names.AttrTimePerOutputTok, names.AttrTimeInOther, names.AttrBottleneck,
	names.AttrInputTokens, names.AttrOutputTokens, names.AttrProviderName, names.AttrRequestModel,
	names.AttrOperationName, names.AttrLoRAAdapter, names.AttrAnomaly, names.AttrErrorType,
	srcInference,
}

// Classify says what kind of span this is. It never looks at the
// instrumentation scope, whose name changes between engine versions.
func Classify(span ptrace.Span) Kind {
	name := span.Name()
	attrs := span.Attributes()
	switch {
	case name == "llm_request":
		if isTRT(span) {
			return KindTensorRTLLM
		}
		return KindVLLM
	case IsSGLangRoot(name):
		return KindSGLangRoot
	case sglangStages[name]:
		return KindSGLangStage
	}
	if _, ok := tgiSpans[name]; ok && hasAny(attrs, tgiTotal, tgiQueue, tgiInference, tgiValidation, tgiPerToken) {
		return KindTGI
	}
	// TensorRT-LLM names its request span after the serving handler; it is
	// recognised by vLLM's latency pair instead of its name.
	if hasAny(attrs, names.AttrE2E) && hasAny(attrs, names.AttrTimeToFirstToken) {
		return KindTensorRTLLM
	}
	return KindNone
}

// IsSGLangRoot reports whether name is SGLang's root request span name,
// f"{role} Req {rid[:8]}": role is empty in unified mode, so the name then
// starts with a space.
func IsSGLangRoot(name string) bool {
	i := strings.Index(name, " Req ")
	if i < 0 {
		return false
	}
	role, rid := name[:i], name[i+len(" Req "):]
	return !strings.Contains(role, " ") && rid != "" && len(rid) <= 64 && !strings.Contains(rid, " ")
}

func isTRT(span ptrace.Span) bool {
	if _, ok := span.Attributes().Get(srcKVTransfer); ok {
		return true
	}
	evs := span.Events()
	for i := 0; i < evs.Len(); i++ {
		if trtEvents[evs.At(i).Name()] {
			return true
		}
	}
	return false
}

func hasAny(m pcommon.Map, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m.Get(k); ok {
			return true
		}
	}
	return false
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

// ClassifyKeys are the span attribute keys Classify reads. A caller that
// removes content only after Classify (see Settings.RemoveContent) must make
// sure none of them is content, or Classify would see what it should not.
var ClassifyKeys = []string{
	srcKVTransfer, tgiTotal, tgiQueue, tgiInference, tgiValidation, tgiPerToken,
	names.AttrE2E, names.AttrTimeToFirstToken,
}

// Settings are the inputs that come from configuration.
type Settings struct {
	ModelResourceAttributes []string
	DefaultModel            string
	LoRAAttributes          []string
	OperationName           string

	// Set by RemoveContent.
	content        *redact.Matcher
	contentKeys    [numKeys]bool // content.Match(keyNames[i])
	contentReasons bool          // content.Match(srcFinishReasons)
}

// RemoveContent makes Normalize remove the attributes m matches (prompt and
// completion content) in the walk it makes anyway, rather than in a walk of
// their own, and treat them as absent, as if removed before. Call it once,
// before Normalize.
func (s *Settings) RemoveContent(m *redact.Matcher) {
	s.content = m
	for i, k := range keyNames {
		s.contentKeys[i] = m.Match(k)
	}
	s.contentReasons = m.Match(srcFinishReasons)
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

// Queue is SGLang's queue time taken from its stage spans, if known.
type Queue struct {
	Seconds float64
	Known   bool
}

// Timeline is what phase-span placement needs; a field is valid when its
// ok flag is set.
type Timeline struct {
	TTFT, Queue, Prefill, Decode         float64
	TTFTOK, QueueOK, PrefillOK, DecodeOK bool
}

// Result is what Normalize did to one span.
type Result struct {
	// ContentRemoved is how many content attributes Normalize removed (see
	// Settings.RemoveContent).
	ContentRemoved int
	// Processed: an earlier inference processor already wrote the canonical
	// set (see Processed), so Normalize left the span as it was and the
	// other fields are empty.
	Processed bool
	Provider  string
	RequestID string   // gen_ai.request.id, "" when absent or not a string
	Anomalies []string // "<key>:<problem>" or a computed check, sorted
	Timeline  Timeline
}

// figure is one number read from a span, with its problem if bad.
type figure struct {
	v  float64
	ok bool
}

// Normalize writes the canonical attribute set on a request span of the
// given kind and returns what it found. Bad values are removed, never
// replaced, and listed in inferprof.anomaly. A span an earlier inference
// processor already handled is left alone; the check rides on the same walk
// of the attributes, so callers need not call Processed first.
func Normalize(kind Kind, span ptrace.Span, res *Resource, set *Settings, q Queue) Result {
	attrs := span.Attributes()
	n := normalizer{attrs: attrs}
	n.snap.fill(attrs, set)
	removed := n.snap.content
	if removed > 0 {
		attrs.RemoveIf(func(k string, _ pcommon.Value) bool { return set.content.Match(k) })
	}
	if sn := &n.snap; sn.has[kOther] || sn.has[kBottleneck] || sn.has[kAnomaly] {
		return Result{Processed: true, ContentRemoved: removed}
	}

	var ttft, e2e, queue, prefill, decode, inference figure
	var in, out figure
	switch kind {
	case KindVLLM, KindTensorRTLLM:
		required := kind == KindVLLM
		ttft = n.seconds(kTTFT, true)
		e2e = n.seconds(kE2E, true)
		queue = n.seconds(kQueue, required)
		prefill = n.seconds(kPrefill, required)
		decode = n.seconds(kDecode, required)
		in = n.count(kPromptTokens, kInputTokens, required)
		out = n.count(kCompletionTokens, kOutputTokens, required)
	case KindSGLangRoot:
		ttft = n.seconds(kTTFT, false)
		e2e = n.seconds(kE2E, true)
		prefill = n.seconds(kPrefill, false)
		decode = n.seconds(kDecode, false)
		in = n.count(kPromptTokens, kInputTokens, false)
		out = n.count(kCompletionTokens, kOutputTokens, false)
		// SGLang's prefill runs from dispatch to first token, so it
		// includes queueing; split the queue out when the stages told us.
		if q.Known && prefill.ok {
			engine := prefill.v - q.Seconds
			switch {
			case engine >= 0:
				queue, prefill = figure{q.Seconds, true}, figure{engine, true}
			case -engine <= tolerance(prefill.v):
				queue, prefill = figure{prefill.v, true}, figure{0, true}
			default:
				n.anomaly("queue_exceeds_prefill")
			}
		}
	case KindTGI:
		e2e = n.duration(kTGITotal, true)
		queue = n.duration(kTGIQueue, false)
		inference = n.duration(kTGIInference, false)
		// TGI writes no token counts today; read them if a version does.
		in = n.count(kPromptTokens, kInputTokens, false)
		out = n.count(kCompletionTokens, kOutputTokens, false)
	}

	// With no output token there is no first token: an engine's 0 is not a
	// time to first token, and decode did not happen.
	if out.ok && out.v == 0 {
		if ttft.ok {
			attrs.Remove(names.AttrTimeToFirstToken)
			ttft = figure{}
		}
	}

	// Time per output token: decode spread over the tokens after the first.
	tpot := figure{}
	if decode.ok && out.ok && out.v >= 2 {
		tpot = figure{decode.v / (out.v - 1), true}
	}

	// The rest: e2e minus the engine's phases (tokenisation,
	// detokenisation, the frontend). The phases come from another clock than
	// e2e, so a small overshoot is skew and counts as zero.
	other := figure{}
	engine, engineOK := 0.0, false
	switch {
	case prefill.ok && decode.ok:
		engine, engineOK = prefill.v+decode.v, true
	case inference.ok:
		engine, engineOK = inference.v, true
	}
	if e2e.ok && engineOK && (queue.ok || kind == KindSGLangRoot) {
		// SGLang without its queue stage: the queue is inside prefill.
		used := engine
		if queue.ok {
			used += queue.v
		}
		rest := e2e.v - used
		switch {
		case rest >= 0:
			other = figure{rest, true}
		case -rest <= tolerance(e2e.v):
			other = figure{0, true}
		default:
			n.anomaly("phases_exceed_e2e")
		}
	}
	bneck := ""
	if queue.ok && prefill.ok && decode.ok {
		bneck = bottleneck(queue.v, prefill.v, decode.v, other)
	}

	sn := &n.snap
	provider := providerOf(kind, sn, res)
	model := modelOf(sn, res, set)
	lora := loraOf(kind, sn, attrs, res, set)
	op := operationOf(kind, span, sn, set)
	et := errorTypeOf(span, sn)
	tgiInf := kind == KindTGI && inference.ok

	// Grow the attribute slice once, by exactly the keys the span lacks,
	// rather than once per Put or by a guess.
	added := 0
	for i, ok := range [...]bool{
		kTTFT: ttft.ok, kE2E: e2e.ok, kQueue: queue.ok, kPrefill: prefill.ok, kDecode: decode.ok,
		kInputTokens: in.ok, kOutputTokens: out.ok, kTPOT: tpot.ok, kOther: other.ok,
		kBottleneck: bneck != "", kProvider: provider != "", kRequestModel: model != "",
		kLoRA: lora != "", kOperation: op != "", kErrorType: et != "", kInference: tgiInf,
		kAnomaly: len(n.anomalies) > 0,
	} {
		if ok && !sn.has[i] {
			added++
		}
	}
	attrs.EnsureCapacity(attrs.Len() + added)

	putSeconds(attrs, sn, kTTFT, ttft)
	putSeconds(attrs, sn, kE2E, e2e)
	putSeconds(attrs, sn, kQueue, queue)
	putSeconds(attrs, sn, kPrefill, prefill)
	putSeconds(attrs, sn, kDecode, decode)
	if tgiInf {
		attrs.PutDouble(srcInference, inference.v)
	}
	if in.ok {
		attrs.PutInt(names.AttrInputTokens, int64(in.v))
	}
	if out.ok {
		attrs.PutInt(names.AttrOutputTokens, int64(out.v))
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
	if sn.loraLive {
		// A LoRA key that is also one we write is read after our writes.
		lora = loraOf(kind, sn, attrs, res, set)
	}
	if lora != "" {
		putStr(attrs, sn, kLoRA, lora)
	}
	putStr(attrs, sn, kOperation, op)
	if et != "" {
		putStr(attrs, sn, kErrorType, et)
	}

	r := Result{ContentRemoved: removed, Provider: provider, RequestID: sn.str(kRequestID), Timeline: Timeline{
		TTFT: ttft.v, TTFTOK: ttft.ok, Queue: queue.v, QueueOK: queue.ok,
		Prefill: prefill.v, PrefillOK: prefill.ok, Decode: decode.v, DecodeOK: decode.ok,
	}}
	if len(n.anomalies) > 0 {
		sort.Strings(n.anomalies)
		attrs.PutStr(names.AttrAnomaly, strings.Join(n.anomalies, ","))
		r.Anomalies = n.anomalies
	}
	return r
}

// tolerance is how far apart two clocks' figures may be before it is an
// anomaly rather than skew: 1 ms or 1 %, whichever is larger.
func tolerance(total float64) float64 {
	return math.Max(0.001, 0.01*total)
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

type normalizer struct {
	attrs     pcommon.Map
	snap      snapshot
	anomalies []string
}

func (n *normalizer) anomaly(s string) { n.anomalies = append(n.anomalies, s) }

func (n *normalizer) bad(key, problem string) figure {
	n.anomaly(key + ":" + problem)
	return figure{}
}

// seconds reads a float-seconds latency. A bad value is removed from the
// span (the canonical key is the source key) and reported.
func (n *normalizer) seconds(i int, required bool) figure {
	key := keyNames[i]
	v, ok := n.snap.get(i)
	if !ok {
		if required {
			return n.bad(key, "missing")
		}
		return figure{}
	}
	var f float64
	switch v.typ {
	case pcommon.ValueTypeDouble:
		f = v.d
	case pcommon.ValueTypeInt:
		f = float64(v.i)
	default:
		n.attrs.Remove(key)
		return n.bad(key, "wrong_type")
	}
	if p := checkNumber(f); p != "" {
		n.attrs.Remove(key)
		return n.bad(key, p)
	}
	return figure{f, true}
}

// duration reads a TGI duration, which TGI records as Rust's Debug format
// of a Duration, e.g. "1.2345s", "12.5ms", "830µs".
func (n *normalizer) duration(i int, required bool) figure {
	key := keyNames[i]
	v, ok := n.snap.get(i)
	if !ok {
		if required {
			return n.bad(key, "missing")
		}
		return figure{}
	}
	var f float64
	switch v.typ {
	case pcommon.ValueTypeStr:
		d, err := time.ParseDuration(strings.TrimSpace(v.s))
		if err != nil {
			return n.bad(key, "unparsable")
		}
		f = d.Seconds()
	case pcommon.ValueTypeDouble:
		f = v.d
	case pcommon.ValueTypeInt:
		f = float64(v.i)
	default:
		return n.bad(key, "wrong_type")
	}
	if p := checkNumber(f); p != "" {
		return n.bad(key, p)
	}
	return figure{f, true}
}

// count reads a token count from src, or from dst when an engine already
// writes the semconv name.
func (n *normalizer) count(srcI, dstI int, required bool) figure {
	src, dst := keyNames[srcI], keyNames[dstI]
	key := src
	v, ok := n.snap.get(srcI)
	if !ok {
		key = dst
		v, ok = n.snap.get(dstI)
	}
	if !ok {
		if required {
			return n.bad(src, "missing")
		}
		return figure{}
	}
	switch v.typ {
	case pcommon.ValueTypeInt:
		if v.i < 0 {
			n.attrs.Remove(dst)
			return n.bad(key, "negative")
		}
		return figure{float64(v.i), true}
	case pcommon.ValueTypeDouble:
		f := v.d
		if p := checkNumber(f); p != "" {
			n.attrs.Remove(dst)
			return n.bad(key, p)
		}
		if f != math.Trunc(f) || f > math.MaxInt64/2 {
			n.attrs.Remove(dst)
			return n.bad(key, "not_integer")
		}
		return figure{f, true}
	}
	n.attrs.Remove(dst)
	return n.bad(key, "wrong_type")
}

// AnomalyReasons are the reasons an anomaly can have: the problem part of
// "<key>:<problem>" and the computed checks.
var AnomalyReasons = []string{
	"missing", "wrong_type", "unparsable", "negative", "not_integer", "nan", "infinite",
	"queue_exceeds_prefill", "phases_exceed_e2e",
}

func checkNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 0):
		return "infinite"
	case f < 0:
		return "negative"
	}
	return ""
}

func strAttr(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
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

func loraOf(kind Kind, sn *snapshot, attrs pcommon.Map, res *Resource, set *Settings) string {
	if l := sn.str(kLoRA); l != "" {
		return l
	}
	for j, k := range set.LoRAAttributes {
		var l string
		if j < len(sn.lora) && !liveKey(k) {
			l = sn.lora[j]
		} else {
			l = strAttr(attrs, k)
		}
		if l != "" {
			return l
		}
	}
	if kind == KindTGI {
		if l := tgiAdapter(sn.str(kTGIParameters)); l != "" {
			return l
		}
	}
	return res.LoRA
}

// tgiAdapter finds adapter_id: Some("name") in TGI's Debug-formatted
// GenerateParameters.
func tgiAdapter(params string) string {
	const marker = `adapter_id: Some("`
	i := strings.Index(params, marker)
	if i < 0 {
		return ""
	}
	rest := params[i+len(marker):]
	j := strings.IndexByte(rest, '"')
	if j <= 0 || j > 256 {
		return ""
	}
	return rest[:j]
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
// type of its exception event, else "_OTHER" (semconv's fallback); an
// aborted request (finish reason "abort") gets "abort".
func errorTypeOf(span ptrace.Span, sn *snapshot) string {
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
		if sn.aborted {
			return "abort"
		}
		return names.ErrorTypeOther
	}
	if sn.aborted {
		return "abort"
	}
	return ""
}

// aborted reads gen_ai.response.finish_reasons, a JSON string in vLLM and
// SGLang ('["abort"]') and a string array in semconv.
func abortedValue(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return strings.Contains(v.Str(), `"abort"`) || v.Str() == "abort"
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			if s.At(i).Type() == pcommon.ValueTypeStr && s.At(i).Str() == "abort" {
				return true
			}
		}
	}
	return false
}

// scalar is one attribute value copied out of the span, so reads stay valid
// while the map is edited (Remove shifts entries under a pcommon.Value).
type scalar struct {
	typ pcommon.ValueType
	d   float64
	i   int64
	s   string
}

// Indexes of the span attributes Normalize reads; one pass over the map
// fills them instead of a linear Get per key.
const (
	kTTFT = iota
	kE2E
	kQueue
	kPrefill
	kDecode
	kPromptTokens
	kCompletionTokens
	kInputTokens
	kOutputTokens
	kProvider
	kSystem
	kRequestModel
	kResponseModel
	kLoRA
	kOperation
	kRequestID
	kErrorType
	kTGITotal
	kTGIQueue
	kTGIInference
	kTGIParameters
	// Keys only this processor writes; read to know whether a Put adds one.
	kTPOT
	kOther
	kBottleneck
	kInference
	kAnomaly
	numKeys
)

// keyNames are the keys by index.
var keyNames = [numKeys]string{
	kTTFT:             names.AttrTimeToFirstToken,
	kE2E:              names.AttrE2E,
	kQueue:            names.AttrTimeInQueue,
	kPrefill:          names.AttrTimeInPrefill,
	kDecode:           names.AttrTimeInDecode,
	kPromptTokens:     srcPromptTokens,
	kCompletionTokens: srcCompletionTokens,
	kInputTokens:      names.AttrInputTokens,
	kOutputTokens:     names.AttrOutputTokens,
	kProvider:         names.AttrProviderName,
	kSystem:           srcSystem,
	kRequestModel:     names.AttrRequestModel,
	kResponseModel:    srcResponseModel,
	kLoRA:             names.AttrLoRAAdapter,
	kOperation:        names.AttrOperationName,
	kRequestID:        names.AttrRequestID,
	kErrorType:        names.AttrErrorType,
	kTGITotal:         tgiTotal,
	kTGIQueue:         tgiQueue,
	kTGIInference:     tgiInference,
	kTGIParameters:    tgiParameters,
	kTPOT:             names.AttrTimePerOutputTok,
	kOther:            names.AttrTimeInOther,
	kBottleneck:       names.AttrBottleneck,
	kInference:        srcInference,
	kAnomaly:          names.AttrAnomaly,
}

// keyIndex maps a key to its index, or -1. A switch compiles to string
// comparisons, cheaper here than a map lookup per attribute.
func keyIndex(k string) int {
	switch k {
	case names.AttrTimeToFirstToken:
		return kTTFT
	case names.AttrE2E:
		return kE2E
	case names.AttrTimeInQueue:
		return kQueue
	case names.AttrTimeInPrefill:
		return kPrefill
	case names.AttrTimeInDecode:
		return kDecode
	case srcPromptTokens:
		return kPromptTokens
	case srcCompletionTokens:
		return kCompletionTokens
	case names.AttrInputTokens:
		return kInputTokens
	case names.AttrOutputTokens:
		return kOutputTokens
	case names.AttrProviderName:
		return kProvider
	case srcSystem:
		return kSystem
	case names.AttrRequestModel:
		return kRequestModel
	case srcResponseModel:
		return kResponseModel
	case names.AttrLoRAAdapter:
		return kLoRA
	case names.AttrOperationName:
		return kOperation
	case names.AttrRequestID:
		return kRequestID
	case names.AttrErrorType:
		return kErrorType
	case tgiTotal:
		return kTGITotal
	case tgiQueue:
		return kTGIQueue
	case tgiInference:
		return kTGIInference
	case tgiParameters:
		return kTGIParameters
	case names.AttrTimePerOutputTok:
		return kTPOT
	case names.AttrTimeInOther:
		return kOther
	case names.AttrBottleneck:
		return kBottleneck
	case srcInference:
		return kInference
	case names.AttrAnomaly:
		return kAnomaly
	}
	return -1
}

// liveKey reports whether a LoRA key is one the snapshot does not copy for
// LoRA, so it is read from the span itself.
func liveKey(k string) bool {
	return k == srcFinishReasons || keyIndex(k) >= 0
}

type snapshot struct {
	vals    [numKeys]scalar
	has     [numKeys]bool
	aborted bool

	// lora[j] is the string value of Settings.LoRAAttributes[j] on the span
	// (its first occurrence, as Map.Get sees it), for the first len(lora)
	// keys that are not also keys above.
	lora     [8]string
	loraSeen uint8
	// loraLive: a LoRA key is one this processor writes, so it must be read
	// from the span after the writes.
	loraLive bool

	// content counts the content keys seen (Settings.RemoveContent); they
	// are left out of the snapshot.
	content int
}

func (sn *snapshot) fill(attrs pcommon.Map, set *Settings) {
	loras := set.LoRAAttributes
	for _, k := range loras {
		if liveKey(k) {
			sn.loraLive = true
		}
	}
	attrs.Range(func(k string, v pcommon.Value) bool {
		if k == srcFinishReasons {
			if set.contentReasons {
				sn.content++
			} else {
				sn.aborted = abortedValue(v)
			}
			return true
		}
		i := keyIndex(k)
		if i < 0 {
			if set.content != nil && set.content.Match(k) {
				sn.content++
				return true
			}
			for j := 0; j < len(loras) && j < len(sn.lora); j++ {
				if loras[j] == k && sn.loraSeen&(1<<j) == 0 {
					sn.loraSeen |= 1 << j
					if v.Type() == pcommon.ValueTypeStr {
						sn.lora[j] = v.Str()
					}
				}
			}
			return true
		}
		if set.contentKeys[i] {
			sn.content++
			return true
		}
		sc := scalar{typ: v.Type()}
		switch sc.typ {
		case pcommon.ValueTypeDouble:
			sc.d = v.Double()
		case pcommon.ValueTypeInt:
			sc.i = v.Int()
		case pcommon.ValueTypeStr:
			sc.s = v.Str()
		}
		sn.vals[i], sn.has[i] = sc, true
		return true
	})
}

// get returns the value at index i, by pointer: a scalar is 40 bytes, and
// the snapshot does not change after fill.
func (sn *snapshot) get(i int) (*scalar, bool) {
	return &sn.vals[i], sn.has[i]
}

// str returns a string attribute the snapshot holds, or "".
func (sn *snapshot) str(i int) string {
	if v, ok := sn.get(i); ok && v.typ == pcommon.ValueTypeStr {
		return v.s
	}
	return ""
}
