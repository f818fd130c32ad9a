// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build gpu && cgo

package nvmlreceiver

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

// smiFields are read with `nvidia-smi --query-gpu` in the same run as the receiver's scrape.
var smiFields = []string{
	"uuid", "name", "pci.bus_id", "driver_version", "memory.total", "memory.used",
	"temperature.gpu", "power.draw", "clocks.sm", "clocks.mem", "pstate", "mig.mode.current", "compute_cap",
}

// TestAgainstNvidiaSmi runs the receiver on the real driver and compares it with nvidia-smi. Run it
// on a GPU machine with receiver/nvmlreceiver/testdata/compare-nvidia-smi.sh; it prints a table
// for the README.
func TestAgainstNvidiaSmi(t *testing.T) {
	out, err := exec.Command("nvidia-smi", "--query-gpu="+strings.Join(smiFields, ","),
		"--format=csv,noheader,nounits").Output()
	require.NoError(t, err, "nvidia-smi")

	env := newTestEnv(t, nvml.New(), func(c *Config) { c.Processes.ProcRoot = "/proc" })
	require.NoError(t, env.src.start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, env.src.shutdown(context.Background())) }()
	env.src.now = time.Now
	md, err := env.src.scrapeMetrics(context.Background())
	require.NoError(t, err)

	fmt.Println("| GPU | field | nvidia-smi | nvml receiver |")
	fmt.Println("|---|---|---|---|")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ", ")
		require.Len(t, f, len(smiFields), line)
		smi := map[string]string{}
		for i, k := range smiFields {
			smi[k] = strings.TrimSpace(f[i])
		}
		rm := resourceByUUID(t, md, smi["uuid"])
		a := rm.Resource().Attributes().AsRaw()
		row := func(field, want string, got any) {
			fmt.Printf("| %v | %s | %s | %v |\n", a["nvidia.gpu.index"], field, want, got)
		}
		row("name", smi["name"], a["hw.name"])
		assert.Equal(t, smi["name"], a["hw.name"])
		row("pci.bus_id", smi["pci.bus_id"], a["nvidia.gpu.pci.bus_id"])
		assert.True(t, strings.EqualFold(smi["pci.bus_id"], a["nvidia.gpu.pci.bus_id"].(string)))
		row("driver_version", smi["driver_version"], a["hw.driver_version"])
		assert.Equal(t, smi["driver_version"], a["hw.driver_version"])
		row("compute_cap", smi["compute_cap"], a["nvidia.gpu.compute_capability"])
		assert.Equal(t, smi["compute_cap"], a["nvidia.gpu.compute_capability"])
		row("mig.mode.current", smi["mig.mode.current"], a["nvidia.gpu.mig.mode"])

		num := func(k string) float64 {
			v, err := strconv.ParseFloat(smi[k], 64)
			require.NoError(t, err, k)
			return v
		}
		limitMiB := point(t, rm, "hw.gpu.memory.limit", "By") / (1 << 20)
		row("memory.total MiB", smi["memory.total"], limitMiB)
		assert.InDelta(t, num("memory.total"), limitMiB, 1)
		usedMiB := point(t, rm, "hw.gpu.memory.usage", "By") / (1 << 20)
		row("memory.used MiB", smi["memory.used"], math.Round(usedMiB))
		assert.InDelta(t, num("memory.used"), usedMiB, 1024, "memory moves between the two reads")
		temp := point(t, rm, "hw.temperature", "Cel")
		row("temperature.gpu C", smi["temperature.gpu"], temp)
		assert.InDelta(t, num("temperature.gpu"), temp, 5)
		power := point(t, rm, "hw.power", "W")
		row("power.draw W", smi["power.draw"], power)
		assert.InDelta(t, num("power.draw"), power, math.Max(30, 0.2*num("power.draw")))
		sm := point(t, rm, "nvidia.gpu.clock.frequency", "Hz", "nvidia.gpu.clock", "sm") / 1e6
		row("clocks.sm MHz", smi["clocks.sm"], sm)
		assert.InDelta(t, num("clocks.sm"), sm, math.Max(200, 0.25*num("clocks.sm")))
		mem := point(t, rm, "nvidia.gpu.clock.frequency", "Hz", "nvidia.gpu.clock", "memory") / 1e6
		row("clocks.mem MHz", smi["clocks.mem"], mem)
		assert.InDelta(t, num("clocks.mem"), mem, 1)
		ps := point(t, rm, "nvidia.gpu.performance_state", "1")
		row("pstate", smi["pstate"], ps)
		assert.Equal(t, smi["pstate"], "P"+strconv.Itoa(int(ps)))
	}
}
