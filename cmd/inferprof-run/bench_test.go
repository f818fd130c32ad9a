// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

const burstBytes = 100 << 20

// burstFile writes 100 MiB of engine output: vLLM INFO lines, one ERROR
// line in a thousand, one traceback in ten thousand.
func burstFile(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "burst.log")
	f, err := os.Create(path)
	require.NoError(b, err)
	w := bufio.NewWriter(f)
	n := 0
	for i := 0; n < burstBytes; i++ {
		var line string
		switch {
		case i%10000 == 9999:
			line = "(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708] Traceback (most recent call last):\n" +
				"(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708]   File \"/v/core.py\", line 699, in run_engine_core\n" +
				"(EngineCore_DP0 pid=9) ERROR 12-01 10:00:01 [core.py:708] RuntimeError: boom\n"
		case i%1000 == 999:
			line = "(APIServer pid=7) ERROR 12-01 10:00:00 [serving_chat.py:210] Error in preprocessing prompt inputs " + strconv.Itoa(i) + "\n"
		default:
			line = "(APIServer pid=7) INFO 12-01 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 tokens/s, Running: 32 reqs, line " + strconv.Itoa(i) + "\n"
		}
		m, err := w.WriteString(line)
		require.NoError(b, err)
		n += m
	}
	require.NoError(b, w.Flush())
	require.NoError(b, f.Close())
	return path
}

// BenchmarkOutputBurst: an engine (cat) writes a 100 MiB burst to a pipe
// its parent drains, as a container runtime does with stdout. exec: the
// launcher exec()s cat, which writes to that pipe itself. supervised: cat
// writes to the launcher's pipe, the launcher copies to that pipe and reads
// the errors for a live OTLP server on loopback. Both run the same binary,
// so the ratio is the supervision's cost. See README.md for the figure.
func BenchmarkOutputBurst(b *testing.B) {
	file := burstFile(b)
	_, addr := startOTLP(b)
	for _, mode := range []struct {
		name  string
		flags []string
	}{
		{"mode=exec", []string{"-exec"}},
		{"mode=supervised", nil},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(burstBytes)
			for b.Loop() {
				args := append([]string{"-quiet", "-no-hook", "-no-cupti", "-logs-endpoint", addr}, mode.flags...)
				cmd := exec.Command(launcherBin, append(args, "cat", file)...)
				out, err := cmd.StdoutPipe()
				require.NoError(b, err)
				require.NoError(b, cmd.Start())
				n, err := io.Copy(io.Discard, out)
				require.NoError(b, err)
				require.NoError(b, cmd.Wait())
				require.GreaterOrEqual(b, n, int64(burstBytes))
			}
		})
	}
}
