// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadata"
	"github.com/inferprof/inferprof/internal/keyindex"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepspan"
)

type metricsConnector struct {
	id        component.ID
	logger    *zap.Logger
	cfg       *Config
	next      consumer.Metrics
	clock     clockwork.Clock
	telemetry *metadata.TelemetryBuilder
	steps     *stepspan.Reader
	series    atomic.Int64 // for the self-metric, read without the lock

	// Goodput targets in seconds; 0 means none.
	goodTTFT, goodTPOT, goodE2E float64

	mu    sync.Mutex // guards everything below
	store *aggregate.Store
	convs *conversations
	// turnOverflow counts conversations observed into the overflow series,
	// reported with the next batch's counts.
	turnOverflow int64
	step         stepspan.Step                         // the engine.step span being aggregated
	idCache      map[aggregate.ResourceKey]pcommon.Map // identity's results
	// windowSpans counts the request and step spans aggregated since the
	// last flush the next consumer took: what a crash now would lose.
	windowSpans uint64

	// The window marker (marker.go); nil without storage. Written by the
	// flush goroutine only.
	marker          storage.Client
	markerOpened    time.Time
	markerErrLogged time.Time
	markerSpans     atomic.Int64 // last written, for the self-metric

	cancel       context.CancelFunc
	wg           sync.WaitGroup
	shutdownOnce sync.Once
	overflowLog  *overflowLog
}

var _ connector.Traces = (*metricsConnector)(nil)

func newConnector(set connector.Settings, cfg *Config, next consumer.Metrics, clock clockwork.Clock) (*metricsConnector, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	steps, err := stepspan.NewReader(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	maxEx := 0
	if cfg.Exemplars.Enabled {
		maxEx = cfg.Exemplars.MaxPerDataPoint
	}
	c := &metricsConnector{
		id:          set.ID,
		logger:      set.Logger,
		cfg:         cfg,
		next:        next,
		clock:       clock,
		telemetry:   tb,
		steps:       steps,
		goodTTFT:    cfg.Goodput.TimeToFirstToken.Seconds(),
		goodTPOT:    cfg.Goodput.TimePerOutputToken.Seconds(),
		goodE2E:     cfg.Goodput.E2E.Seconds(),
		idCache:     map[aggregate.ResourceKey]pcommon.Map{},
		overflowLog: newOverflowLog(set.Logger, cfg),
		convs:       newConversations(cfg.Conversations.MaxConversations, cfg.Conversations.Idle),
		store: aggregate.NewStore(aggregate.Settings{
			Limit:               cfg.AggregationCardinalityLimit,
			MaxSeriesPerModel:   cfg.MaxSeriesPerModel,
			MaxSeriesPerService: cfg.MaxSeriesPerService,
			MaxExemplars:        maxEx,
			Delta:               cfg.AggregationTemporality == TemporalityDelta,
			Expiration:          cfg.MetricsExpiration,
			Disabled:            cfg.disabledMetrics(),
			ScopeName:           metadata.ScopeName,
			ScopeVersion:        set.BuildInfo.Version,
			GoodputTargets:      cfg.Goodput.targets(),
		}, pcommon.NewTimestampFromTime(clock.Now())),
	}
	err = tb.RegisterConnectorInferenceMetricsSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(c.series.Load())
		return nil
	})
	if err == nil {
		err = tb.RegisterConnectorInferenceMetricsWindowSpansCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(c.markerSpans.Load())
			return nil
		})
	}
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return c, nil
}

// Start counts a window the last run left open (with storage), then starts
// the flush ticker and the ticker that keeps the window marker current.
func (c *metricsConnector) Start(startCtx context.Context, host component.Host) error {
	if c.cfg.Storage != nil {
		if err := c.openMarker(startCtx, host); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	ticker := c.clock.NewTicker(c.cfg.MetricsFlushInterval)
	var markerTick <-chan time.Time // nil without storage: never ready
	if c.marker != nil {
		mt := c.clock.NewTicker(markerEvery)
		markerTick = mt.Chan()
		context.AfterFunc(ctx, mt.Stop)
	}
	c.wg.Go(func() {
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.Chan():
				c.flush(ctx, false)
			case <-markerTick:
				c.followMarker(ctx)
			}
		}
	})
	c.logger.Info("inference_metrics connector started",
		zap.Duration("metrics_flush_interval", c.cfg.MetricsFlushInterval),
		zap.String("aggregation_temporality", string(c.cfg.AggregationTemporality)),
		zap.Int("aggregation_cardinality_limit", c.cfg.AggregationCardinalityLimit))
	return nil
}

// Shutdown stops the ticker and flushes what was aggregated since the last
// flush, so a delta interval is not lost. It is idempotent and safe without
// Start.
func (c *metricsConnector) Shutdown(ctx context.Context) error {
	var err error
	c.shutdownOnce.Do(func() {
		defer c.telemetry.Shutdown()
		defer c.steps.Shutdown()
		if c.cancel == nil {
			return
		}
		c.cancel()
		done := make(chan struct{})
		go func() {
			c.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		c.flush(ctx, true)
		// Stopped cleanly: the last window was flushed or counted as dropped.
		if err := c.writeMarker(ctx, 0); err != nil {
			c.logMarkerError(err)
		}
		c.closeMarker(ctx)
		c.logger.Info("inference_metrics connector stopped")
	})
	return err
}

// Capabilities says the connector only reads spans.
func (*metricsConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// flush builds the metrics under the lock and sends them outside it. In
// delta temporality a refused interval is put back into its series, so the
// next flush reports it (as the graphsignal exporter's delta converter does);
// only a permanent refusal, or one at shutdown, loses it, and is counted.
func (c *metricsConnector) flush(ctx context.Context, final bool) {
	now := pcommon.NewTimestampFromTime(c.clock.Now())
	c.mu.Lock()
	c.observeTurns(final)
	md, tx := c.store.Flush(now)
	c.series.Store(int64(c.store.Len()))
	taken := c.windowSpans
	c.mu.Unlock()
	var err error
	if md.ResourceMetrics().Len() > 0 {
		// The count first: the next consumer may own md once called.
		points := int64(md.DataPointCount())
		err = c.next.ConsumeMetrics(ctx, md)
		if err != nil {
			c.refused(ctx, err, points, tx, final)
		}
	}
	c.mu.Lock()
	keep := err != nil && !final && !consumererror.IsPermanent(err)
	if keep {
		c.store.Restore(tx)
	} else {
		c.store.Commit(tx)
	}
	c.mu.Unlock()
	if !keep {
		// Taken, or dropped and counted as dropped_points: either way no
		// longer what a crash would lose.
		c.windowFlushed(ctx, taken)
	}
}

func (c *metricsConnector) refused(ctx context.Context, err error, points int64, tx *aggregate.Tx, final bool) {
	c.telemetry.ConnectorInferenceMetricsRefusedFlushes.Add(ctx, 1)
	switch {
	case consumererror.IsPermanent(err) || final:
		c.telemetry.ConnectorInferenceMetricsDroppedPoints.Add(ctx, points)
		c.logger.Error("inference_metrics: next consumer refused metrics; dropped",
			zap.Int64("data_points", points), zap.Bool("shutdown", final), zap.Error(err))
	case tx.Len() > 0:
		c.logger.Warn("inference_metrics: next consumer refused metrics; the interval is kept for the next flush",
			zap.Int("series", tx.Len()), zap.Error(err))
	default:
		// Cumulative: the next flush carries the totals anyway.
		c.logger.Warn("inference_metrics: next consumer refused metrics; the next flush carries the totals", zap.Error(err))
	}
}

// counts are what one batch adds to the self-metrics.
type counts struct {
	spans              uint64 // request and step spans aggregated
	bad, overflow      int64
	sanitized          int64 // label values labelValue changed
	earlyConversations int64
}

// ConsumeTraces aggregates request and engine.step spans; it passes every
// other span by.
func (c *metricsConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := pcommon.NewTimestampFromTime(c.clock.Now())
	var n counts
	c.mu.Lock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		fullRes := rs.Resource().Attributes()
		resAttrs := c.identity(fullRes)
		var resKey aggregate.ResourceKey
		hashed := false
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				var r request
				isStep := span.Name() == names.SpanEngineStep
				isReq := !isStep && parseRequest(span, &r, &n)
				if !isStep && r.has&(hasCost|hasAgent) != 0 {
					if !hashed {
						resKey = c.hashResource(resAttrs)
						hashed = true
					}
					c.aggregateAgentCost(now, resKey, resAttrs, span, &r, &n)
				}
				if !isStep && !isReq {
					continue
				}
				if !hashed {
					resKey = c.hashResource(resAttrs)
					hashed = true
				}
				n.spans++
				if isStep {
					c.aggregateStep(ctx, now, resKey, resAttrs, span, &n)
				} else {
					c.aggregateRequest(now, resKey, resAttrs, fullRes, span, &r, &n)
				}
			}
		}
	}
	c.series.Store(int64(c.store.Len()))
	c.windowSpans += n.spans
	n.overflow += c.turnOverflow
	c.turnOverflow = 0
	c.mu.Unlock()
	if n.earlyConversations > 0 {
		c.telemetry.ConnectorInferenceMetricsConversationsEarly.Add(ctx, n.earlyConversations)
	}
	if n.bad > 0 {
		c.telemetry.ConnectorInferenceMetricsBadValues.Add(ctx, n.bad)
	}
	if n.overflow > 0 {
		c.telemetry.ConnectorInferenceMetricsOverflowSpans.Add(ctx, n.overflow)
		c.overflowLog.note(c.clock.Now(), n.overflow)
	}
	if n.sanitized > 0 {
		c.telemetry.ConnectorInferenceMetricsSanitizedLabels.Add(ctx, n.sanitized)
	}
	return nil
}

// Which request figures a span carried.
const (
	hasTTFT uint16 = 1 << iota
	hasE2E
	hasQueue
	hasPrefill
	hasDecode
	hasOther
	hasTPOT
	hasInTok
	hasOutTok
	hasGaps
	hasCPUOverhead
	isRequest // the span has gen_ai.latency.e2e or time_to_first_token, valid or not
)

// The span attributes parseRequest reads, as indexes of requestKeys: one
// table probe per attribute instead of a switch's string comparisons
// (internal/keyindex).
const (
	keyTTFT = iota
	keyE2E
	keyQueue
	keyPrefill
	keyDecode
	keyOther
	keyTPOT
	keyInTok
	keyOutTok
	keyOp
	keyProvider
	keyModel
	keyErrType
	keyCost
	keyAgent
	keyGaps
	keyGPUCats
	keyGPUTimes
	keyCPUOverhead
)

var requestKeys = keyindex.New(map[string]int{
	names.AttrTimeToFirstToken: keyTTFT,
	names.AttrE2E:              keyE2E,
	names.AttrTimeInQueue:      keyQueue,
	names.AttrTimeInPrefill:    keyPrefill,
	names.AttrTimeInDecode:     keyDecode,
	names.AttrTimeInOther:      keyOther,
	names.AttrTimePerOutputTok: keyTPOT,
	names.AttrInputTokens:      keyInTok,
	names.AttrOutputTokens:     keyOutTok,
	names.AttrOperationName:    keyOp,
	names.AttrProviderName:     keyProvider,
	names.AttrRequestModel:     keyModel,
	names.AttrErrorType:        keyErrType,
	names.AttrRequestCost:      keyCost,
	names.AttrAgentTimeInModel: keyAgent,
	names.AttrITLGaps:          keyGaps,
	names.AttrGPUCategories:    keyGPUCats,
	names.AttrGPUCategoryTimes: keyGPUTimes,
	names.AttrCPUOverhead:      keyCPUOverhead,
})

// request is a request span's canonical figures, read in one pass over its
// attributes. Strings point into the span; nothing is copied.
type request struct {
	has                                            uint16
	ttft, e2e, queue, prefill, decode, other, tpot float64
	inTok, outTok                                  int64
	op, provider, model, errType                   string
	gaps                                           pcommon.Slice
	gpuCats, gpuTimes                              pcommon.Slice // inferprof.gpu.categories and category_times
	cpuOverhead                                    float64
}

func (r *request) is(f uint16) bool { return r.has&f != 0 }

// parseRequest reads the canonical attributes the inference processor writes
// and reports whether span is a request span.
func parseRequest(span ptrace.Span, r *request, n *counts) bool {
	for k, v := range span.Attributes().All() {
		switch requestKeys.Index(k) {
		case keyTTFT:
			r.has |= isRequest | seconds(v, &r.ttft, hasTTFT, n)
		case keyE2E:
			r.has |= isRequest | seconds(v, &r.e2e, hasE2E, n)
		case keyQueue:
			r.has |= seconds(v, &r.queue, hasQueue, n)
		case keyPrefill:
			r.has |= seconds(v, &r.prefill, hasPrefill, n)
		case keyDecode:
			r.has |= seconds(v, &r.decode, hasDecode, n)
		case keyOther:
			r.has |= seconds(v, &r.other, hasOther, n)
		case keyTPOT:
			r.has |= seconds(v, &r.tpot, hasTPOT, n)
		case keyInTok:
			r.has |= count(v, &r.inTok, hasInTok, n)
		case keyOutTok:
			r.has |= count(v, &r.outTok, hasOutTok, n)
		case keyOp:
			r.op = str(v, n)
		case keyProvider:
			r.provider = str(v, n)
		case keyModel:
			r.model = str(v, n)
		case keyErrType:
			r.errType = str(v, n)
		case keyCost:
			r.has |= hasCost
		case keyAgent:
			r.has |= hasAgent
		case keyGaps:
			if v.Type() == pcommon.ValueTypeSlice {
				r.gaps = v.Slice()
				r.has |= hasGaps
			} else {
				n.bad++
			}
		case keyGPUCats:
			r.gpuCats = slice(v, n)
		case keyGPUTimes:
			r.gpuTimes = slice(v, n)
		case keyCPUOverhead:
			r.has |= seconds(v, &r.cpuOverhead, hasCPUOverhead, n)
		}
	}
	if !r.is(isRequest) {
		return false
	}
	if r.errType == "" && span.Status().Code() == ptrace.StatusCodeError {
		r.errType = names.ErrorTypeOther
	}
	return true
}

// seconds reads a non-negative, finite number of seconds into dst and returns
// flag, or counts a bad value and returns 0.
func seconds(v pcommon.Value, dst *float64, flag uint16, n *counts) uint16 {
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f = v.Double()
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	default:
		n.bad++
		return 0
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		n.bad++
		return 0
	}
	*dst = f
	return flag
}

// count reads a non-negative whole number into dst.
func count(v pcommon.Value, dst *int64, flag uint16, n *counts) uint16 {
	var i int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		i = v.Int()
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || f > math.MaxInt64 {
			n.bad++
			return 0
		}
		i = int64(f)
	default:
		n.bad++
		return 0
	}
	if i < 0 {
		n.bad++
		return 0
	}
	*dst = i
	return flag
}

func slice(v pcommon.Value, n *counts) pcommon.Slice {
	if v.Type() != pcommon.ValueTypeSlice {
		n.bad++
		return pcommon.Slice{}
	}
	return v.Slice()
}

// observeGPU adds a request's GPU time by category and its CPU-overhead
// share of its duration.
func observeGPU(q *aggregate.RequestStats, r *request, e2e float64, ts pcommon.Timestamp, tid pcommon.TraceID, sid pcommon.SpanID, n *counts) {
	if r.gpuCats != (pcommon.Slice{}) && r.gpuTimes != (pcommon.Slice{}) {
		if r.gpuCats.Len() != r.gpuTimes.Len() {
			n.bad++
		} else {
			for i := 0; i < r.gpuCats.Len(); i++ {
				var sec float64
				c := r.gpuCats.At(i)
				if c.Type() != pcommon.ValueTypeStr || seconds(r.gpuTimes.At(i), &sec, 1, n) == 0 {
					n.bad += b2i(c.Type() != pcommon.ValueTypeStr)
					continue
				}
				q.AddGPUTime(c.Str(), sec)
			}
		}
	}
	if r.is(hasCPUOverhead) && e2e > 0 {
		q.CPUOverheadShare.ObserveExemplar(min(r.cpuOverhead/e2e, 1), ts, tid, sid)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// str reads a string attribute, fit to be a label (labels.go).
func str(v pcommon.Value, n *counts) string {
	if v.Type() != pcommon.ValueTypeStr {
		n.bad++
		return ""
	}
	s, changed := labelValue(v.Str())
	if changed {
		n.sanitized++
	}
	return s
}

func spanSeconds(span ptrace.Span) float64 {
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if end <= start {
		return 0
	}
	return float64(end-start) / 1e9
}

// aggregateRequest adds a request span to its series under the resource
// identity resAttrs; dimensions read the full resource, fullRes.
func (c *metricsConnector) aggregateRequest(now pcommon.Timestamp, resKey aggregate.ResourceKey, resAttrs, fullRes pcommon.Map, span ptrace.Span, r *request, n *counts) {
	st := c.store
	st.BeginKey(resKey, aggregate.KindRequest)
	st.AddKeyPart(r.op)
	st.AddKeyPart(r.provider)
	st.AddKeyPart(r.model)
	st.AddKeyPart(r.errType)
	for _, d := range c.cfg.Dimensions {
		v, changed := labelValue(dimensionValue(d, span.Attributes(), fullRes))
		if changed {
			n.sanitized++
		}
		st.AddKeyPart(v)
	}
	s := st.Lookup()
	if s == nil {
		var fresh bool
		s, fresh = st.CreateModel(now, resKey, resAttrs, aggregate.KindRequest, r.model)
		if fresh {
			c.fillRequestAttributes(s, span, fullRes, r)
		} else {
			n.overflow++
		}
	}

	q := s.Req
	tid, sid, ts := span.TraceID(), span.SpanID(), span.EndTimestamp()
	q.Requests++
	failed := r.errType != ""

	e2e := r.e2e
	if !r.is(hasE2E) {
		e2e = spanSeconds(span)
	}
	q.Duration.ObserveExemplar(e2e, ts, tid, sid)
	if r.is(hasQueue) {
		q.Queue.ObserveExemplar(r.queue, ts, tid, sid)
	}
	if r.is(hasPrefill) {
		q.Prefill.ObserveExemplar(r.prefill, ts, tid, sid)
	}
	if r.is(hasDecode) {
		q.Decode.ObserveExemplar(r.decode, ts, tid, sid)
	}
	if r.is(hasOther) {
		q.Other.ObserveExemplar(r.other, ts, tid, sid)
	}
	if r.is(hasInTok) {
		q.InputTokens.Observe(float64(r.inTok))
		q.InputTokenSum += uint64(r.inTok)
	}
	if r.is(hasOutTok) {
		q.OutputTokens.Observe(float64(r.outTok))
		q.OutputTokenSum += uint64(r.outTok)
	}
	observeGPU(q, r, e2e, ts, tid, sid, n)
	if !failed {
		// Semantic conventions record TTFT and TPOT for successful responses only.
		if r.is(hasTTFT) {
			q.TTFT.ObserveExemplar(r.ttft, ts, tid, sid)
		}
		tpot, hasTpot := r.tpot, r.is(hasTPOT)
		if !hasTpot && r.is(hasDecode) && r.is(hasOutTok) && r.outTok >= 2 {
			// The processor's own definition, for spans it did not finish.
			tpot, hasTpot = r.decode/float64(r.outTok-1), true
		}
		if hasTpot {
			q.TPOT.ObserveExemplar(tpot, ts, tid, sid)
		}
		if r.is(hasGaps) {
			observeGaps(&q.ITL, r.gaps, ts, tid, sid, n)
		}
		if c.good(r, tpot, hasTpot, e2e) {
			q.Goodput++
		}
	}
	s.Touch(now)
}

func observeGaps(h *aggregate.Histogram, gaps pcommon.Slice, ts pcommon.Timestamp, tid pcommon.TraceID, sid pcommon.SpanID, n *counts) {
	for i := 0; i < gaps.Len(); i++ {
		var g float64
		if seconds(gaps.At(i), &g, 1, n) != 0 {
			h.ObserveExemplar(g, ts, tid, sid)
		}
	}
}

// good applies DistServe's goodput rule: a request is good when it meets
// every target set. A target whose figure is missing is missed, except TPOT
// for a request with fewer than 2 output tokens, which has no TPOT to miss.
func (c *metricsConnector) good(r *request, tpot float64, hasTpot bool, e2e float64) bool {
	if c.goodTTFT > 0 && (!r.is(hasTTFT) || r.ttft > c.goodTTFT) {
		return false
	}
	if c.goodTPOT > 0 {
		switch {
		case hasTpot:
			if tpot > c.goodTPOT {
				return false
			}
		case r.is(hasOutTok) && r.outTok < 2:
		default:
			return false
		}
	}
	return c.goodE2E <= 0 || e2e <= c.goodE2E
}

func (c *metricsConnector) fillRequestAttributes(s *aggregate.Series, span ptrace.Span, resAttrs pcommon.Map, r *request) {
	attrs := s.Attributes()
	putNonEmpty(attrs, names.AttrOperationName, r.op)
	putNonEmpty(attrs, names.AttrProviderName, r.provider)
	putNonEmpty(attrs, names.AttrRequestModel, r.model)
	putNonEmpty(attrs, names.AttrErrorType, r.errType)
	for _, d := range c.cfg.Dimensions {
		v, _ := labelValue(dimensionValue(d, span.Attributes(), resAttrs)) // counted in aggregateRequest
		putNonEmpty(attrs, d.Name, v)
	}
	s.IsError = r.errType != ""
}

func putNonEmpty(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}

// dimensionValue reads a configured dimension from the span, else the
// resource, else its default; "" leaves it out. A kvlist, array or bytes
// value counts as missing: it would become a label of JSON text that no
// content check reads (issue #30).
func dimensionValue(d Dimension, spanAttrs, resAttrs pcommon.Map) string {
	if v, ok := spanAttrs.Get(d.Name); ok && scalar(v) {
		return valueString(v)
	}
	if v, ok := resAttrs.Get(d.Name); ok && scalar(v) {
		return valueString(v)
	}
	if d.Default != nil {
		return *d.Default
	}
	return ""
}

func scalar(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeDouble, pcommon.ValueTypeBool:
		return true
	}
	return false
}

func valueString(v pcommon.Value) string {
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return v.AsString()
}

func (c *metricsConnector) aggregateStep(ctx context.Context, now pcommon.Timestamp, resKey aggregate.ResourceKey, resAttrs pcommon.Map, span ptrace.Span, n *counts) {
	rd := &c.step
	c.steps.Read(ctx, span, rd, stepspan.Batch)
	st := c.store
	st.BeginKey(resKey, aggregate.KindStep)
	s := st.Lookup()
	if s == nil {
		var fresh bool
		if s, fresh = st.Create(now, resKey, resAttrs, aggregate.KindStep); !fresh {
			n.overflow++
		}
	}
	p := s.Step
	p.Steps++
	p.Duration.ObserveExemplar(spanSeconds(span), span.EndTimestamp(), span.TraceID(), span.SpanID())
	// A batch size needs one of its halves; the other, absent, counts 0.
	if rd.PrefillRequests != stepspan.Absent || rd.DecodeRequests != stepspan.Absent {
		p.BatchSize.Observe(float64(max(rd.PrefillRequests, 0) + max(rd.DecodeRequests, 0)))
	}
	if rd.ScheduledTokens != stepspan.Absent {
		p.Tokens.Observe(float64(rd.ScheduledTokens))
	}
	p.Preemptions += uint64(max(rd.Preempted, 0))
	s.Touch(now)
}

// hashResource keys a resource by its attributes, independently of their
// order, as contrib's connectors do (pdatautil.MapHash).
func (*metricsConnector) hashResource(attrs pcommon.Map) aggregate.ResourceKey {
	return pdatautil.MapHash(attrs)
}
