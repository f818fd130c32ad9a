// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/names"
)

// maxEventsPerPoll bounds one non-blocking drain of the event set, so a storm cannot stall a scrape.
const maxEventsPerPoll = 256

// maxXIDCodes bounds the per-device XID counter map (NVIDIA's catalogue has under 200 codes).
const maxXIDCodes = 256

// criticalEvents are the NVML event types registered; each is masked with what the device supports.
const criticalEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError |
	nvml.EventTypeDramRetirementFailure | nvml.EventTypeGpuUnavailableError |
	nvml.EventTypeFatalPoisonError | nvml.EventTypeNonFatalPoisonError | nvml.EventTypeGpuRecoveryAction

func (s *nvmlSource) registerEvents(d *device) {
	if s.eventSet == nil {
		return
	}
	supported, ret := d.handle.GetSupportedEventTypes()
	if !s.ok(context.Background(), d, fieldEvents, ret) {
		return
	}
	mask := supported & criticalEvents
	if mask == 0 {
		return
	}
	// A failure is counted and logged by ok; the GPU's metrics are still read.
	s.ok(context.Background(), d, fieldEvents, d.handle.RegisterEvents(mask, s.eventSet))
}

// pollEvents drains the event set without blocking (timeout 0): it counts XIDs and, when a logs
// pipeline is attached, keeps a bounded list of records for the next logs scrape.
func (s *nvmlSource) pollEvents(ctx context.Context) {
	if s.eventSet == nil {
		return
	}
	for range maxEventsPerPoll {
		ev, ret := s.eventSet.Wait(0)
		if ret == nvml.ERROR_TIMEOUT {
			return
		}
		if ret != nvml.SUCCESS {
			s.tb.ReceiverNvmlDeviceErrors.Add(ctx, 1)
			s.logger.Debug("NVML event wait failed", zap.String("nvml_error", ret.Error()))
			return
		}
		d := s.deviceOf(ev.Device)
		if d == nil {
			continue
		}
		s.tb.ReceiverNvmlEvents.Add(ctx, 1)
		if ev.EventType == nvml.EventTypeXidCriticalError {
			if _, seen := d.xid[ev.EventData]; seen || len(d.xid) < maxXIDCodes {
				d.xid[ev.EventData]++
			} else {
				s.tb.ReceiverNvmlXidCodesDropped.Add(ctx, 1)
			}
		}
		if !s.logs {
			continue
		}
		if len(s.pending) >= s.cfg.Events.MaxPending {
			s.tb.ReceiverNvmlEventsDropped.Add(ctx, 1)
			continue
		}
		s.pending = append(s.pending, pendingEvent{dev: d, ts: pcommon.NewTimestampFromTime(s.now()), eventType: ev.EventType, data: ev.EventData})
	}
}

func (s *nvmlSource) deviceOf(h nvml.Device) *device {
	for _, d := range s.devices {
		if d.handle == h {
			return d
		}
	}
	return nil
}

func fillEventRecord(lr plog.LogRecord, ev pendingEvent) {
	lr.SetTimestamp(ev.ts)
	lr.SetObservedTimestamp(ev.ts)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetSeverityText("ERROR")
	attrs := lr.Attributes()
	attrs.PutStr(names.AttrDeviceID, ev.dev.uuid)
	var body string
	switch ev.eventType {
	case nvml.EventTypeXidCriticalError:
		lr.SetEventName(names.EventNameXID)
		attrs.PutStr(names.AttrGPUEventType, "xid")
		attrs.PutInt(names.AttrXID, int64(ev.data))
		if meaning := xidMeaning(ev.data); meaning != "" {
			attrs.PutStr(names.AttrXIDMeaning, meaning)
			body = fmt.Sprintf("XID %d on GPU %d (%s): %s", ev.data, ev.dev.index, ev.dev.uuid, meaning)
		} else {
			body = fmt.Sprintf("XID %d on GPU %d (%s)", ev.data, ev.dev.index, ev.dev.uuid)
		}
	default:
		name := eventTypeName(ev.eventType)
		lr.SetEventName("nvidia.gpu." + name)
		attrs.PutStr(names.AttrGPUEventType, name)
		attrs.PutInt("nvidia.gpu.event.data", int64(ev.data))
		body = fmt.Sprintf("%s on GPU %d (%s)", strings.ReplaceAll(name, "_", " "), ev.dev.index, ev.dev.uuid)
	}
	lr.Body().SetStr(body)
}

func eventTypeName(t uint64) string {
	switch t {
	case nvml.EventTypeDoubleBitEccError:
		return "double_bit_ecc_error"
	case nvml.EventTypeDramRetirementFailure:
		return "dram_retirement_failure"
	case nvml.EventTypeGpuUnavailableError:
		return "gpu_unavailable_error"
	case nvml.EventTypeFatalPoisonError:
		return "fatal_poison_error"
	case nvml.EventTypeNonFatalPoisonError:
		return "non_fatal_poison_error"
	case nvml.EventTypeGpuRecoveryAction:
		return "gpu_recovery_action"
	default:
		return "event_" + strconv.FormatUint(t, 10)
	}
}
