// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package cost prices requests: API-style calls from a per-model price
// table (per 1M tokens), self-hosted engine requests from the hourly price
// of the GPUs that served them. No price is built in: a request whose model
// or GPU has no configured price has no cost.
package cost // import "github.com/inferprof/inferprof/processor/agentrunprocessor/internal/cost"

import (
	"math"
	"sync"
	"time"
)

// Methods, as written to inferprof.request.cost.method.
const (
	// MethodGPUTime: the request's inferprof.gpu.time × the GPU's price.
	MethodGPUTime = "gpu_time"
	// MethodTokenShare: the request's share, by tokens, of the engine's
	// GPU wall time over the recent window.
	MethodTokenShare = "token_share"
	// MethodPriceTable: tokens × the model's price per 1M tokens.
	MethodPriceTable = "price_table"
)

// Price is a model's price per 1M tokens.
type Price struct {
	Input       float64
	CachedInput float64
	// HasCached: CachedInput was configured; otherwise cached tokens are
	// charged as input.
	HasCached bool
	Output    float64
	Currency  string
}

// GPUPrice is one GPU's price per hour.
type GPUPrice struct {
	Hour     float64
	Currency string
}

// Cost is a priced request.
type Cost struct {
	Value    float64
	Currency string
	Method   string
}

// Tokens is a request's token counts; cached tokens are part of In, as the
// GenAI semantic conventions count them (gen_ai.usage.input_tokens "SHOULD
// include all types of input tokens, including cached tokens").
type Tokens struct {
	In, Cached, Out       int64
	HasIn, HasOut, HasCch bool
}

// Of prices t, or reports false when no token count is known.
func (p Price) Of(t Tokens) (float64, bool) {
	if !t.HasIn && !t.HasOut {
		return 0, false
	}
	cached := int64(0)
	if t.HasCch && t.HasIn {
		cached = min(t.Cached, t.In)
	}
	cachedPrice := p.Input
	if p.HasCached {
		cachedPrice = p.CachedInput
	}
	v := (float64(t.In-cached)*p.Input + float64(cached)*cachedPrice + float64(t.Out)*p.Output) / 1e6
	return v, true
}

// Settings configure a Pricer.
type Settings struct {
	Prices map[string]Price
	GPUs   map[string]GPUPrice
	// DefaultGPU and DefaultGPUCount describe the GPUs of an engine whose
	// resource does not name them.
	DefaultGPU      string
	DefaultGPUCount int
	// ShareWindow is the token-share window; MaxInstances and
	// MaxRecordsPerInstance bound the ledger.
	ShareWindow           time.Duration
	MaxInstances          int
	MaxRecordsPerInstance int
}

// Pricer prices requests. It is safe for concurrent use.
type Pricer struct {
	set    Settings
	ledger *ledger
}

// New returns a pricer, or nil when nothing is priced.
func New(set Settings) *Pricer {
	if len(set.Prices) == 0 && len(set.GPUs) == 0 {
		return nil
	}
	p := &Pricer{set: set}
	if len(set.GPUs) > 0 {
		p.ledger = newLedger(set.ShareWindow, set.MaxInstances, set.MaxRecordsPerInstance)
	}
	return p
}

// Model prices a call to model from the price table.
func (p *Pricer) Model(model string, t Tokens) (Cost, bool) {
	pr, ok := p.set.Prices[model]
	if !ok {
		return Cost{}, false
	}
	v, ok := pr.Of(t)
	if !ok {
		return Cost{}, false
	}
	return Cost{Value: v, Currency: pr.Currency, Method: MethodPriceTable}, true
}

// EngineRequest is what pricing a self-hosted engine request needs.
type EngineRequest struct {
	Instance string // the engine instance (the step window's key)
	GPU      string // GPU name from the resource, "" for the default
	GPUCount int    // GPUs from the resource, 0 for the default
	Model    string
	Tokens   Tokens
	// GPUTime is inferprof.gpu.time, seconds, when HasGPUTime.
	GPUTime    float64
	HasGPUTime bool
	Start, End int64 // unix ns
}

// Engine prices an engine request from its GPUs' price: its measured GPU
// time when it has one, else its share of the engine's wall time by tokens.
// A request whose GPU has no price falls back to the price table.
func (p *Pricer) Engine(r EngineRequest) (Cost, bool) {
	gpu := r.GPU
	if gpu == "" {
		gpu = p.set.DefaultGPU
	}
	gp, ok := p.set.GPUs[gpu]
	if !ok {
		return p.Model(r.Model, r.Tokens)
	}
	perSecond := gp.Hour / 3600
	if r.HasGPUTime {
		return Cost{Value: r.GPUTime * perSecond, Currency: gp.Currency, Method: MethodGPUTime}, true
	}
	n := r.GPUCount
	if n <= 0 {
		n = max(1, p.set.DefaultGPUCount)
	}
	tokens := int64(0)
	if r.Tokens.HasIn {
		tokens += r.Tokens.In
	}
	if r.Tokens.HasOut {
		tokens += r.Tokens.Out
	}
	if r.End <= 0 || r.End < r.Start {
		return Cost{}, false
	}
	share := p.ledger.share(r.Instance, r.Start, r.End, tokens)
	return Cost{Value: share * float64(n) * perSecond, Currency: gp.Currency, Method: MethodTokenShare}, true
}

// ledger keeps, per engine instance, the tokens of the requests that ended
// in the last window, to share the engine's wall time among them.
type ledger struct {
	mu           sync.Mutex
	window       int64
	maxInstances int
	maxRecords   int
	inst         map[string]*instLedger
	tick         uint64
}

type rec struct {
	end    int64
	tokens int64
}

type instLedger struct {
	recs  []rec // in arrival order from head; roughly end order
	head  int
	sum   int64
	since int64 // start of the first request since the engine was last idle a whole window
	used  uint64
}

func newLedger(window time.Duration, maxInstances, maxRecords int) *ledger {
	return &ledger{window: int64(window), maxInstances: max(1, maxInstances), maxRecords: max(1, maxRecords), inst: map[string]*instLedger{}}
}

// share adds a request of tokens that ran from start to end (unix ns) and
// returns its share of the engine's wall time, in seconds: T × tokens / N,
// where N is the tokens of every request that ended in the window before
// end (this one included) and T is the window, or the time since the
// engine's first request when that is shorter (since it started, or since
// it was last idle for a whole window).
func (l *ledger) share(instance string, start, end, tokens int64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.inst[instance]
	if in == nil {
		if len(l.inst) >= l.maxInstances {
			l.evictInstance()
		}
		in = &instLedger{recs: make([]rec, 0, 16)}
		l.inst[instance] = in
	}
	l.tick++
	in.used = l.tick
	cut := end - l.window
	for in.head < len(in.recs) && in.recs[in.head].end < cut {
		in.sum -= in.recs[in.head].tokens
		in.head++
	}
	if in.head == len(in.recs) {
		in.recs, in.head = in.recs[:0], 0
		in.since = start
	}
	in.since = min(in.since, start)
	if len(in.recs)-in.head >= l.maxRecords {
		in.sum -= in.recs[in.head].tokens
		in.head++
	}
	in.recs = append(in.recs, rec{end: end, tokens: tokens})
	in.sum += tokens
	if in.head > 64 && in.head > len(in.recs)/2 {
		n := copy(in.recs, in.recs[in.head:])
		in.recs, in.head = in.recs[:n], 0
	}
	if tokens <= 0 || in.sum <= 0 {
		return 0
	}
	t := float64(min(l.window, max(0, end-in.since))) / 1e9
	return t * float64(tokens) / float64(in.sum)
}

func (l *ledger) evictInstance() {
	var oldest string
	used := uint64(math.MaxUint64)
	for k, in := range l.inst {
		if in.used < used {
			oldest, used = k, in.used
		}
	}
	delete(l.inst, oldest)
}
