// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// chromium finds Debian's chromium. CI installs it (.ci/run) and sets
// CI=true, where a missing browser fails the test; elsewhere it skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
	}
	t.Skip("chromium not installed (apt-get install chromium)")
	return ""
}

// artifactDir is where browser tests leave screenshots:
// INFERPROF_ARTIFACTS, else .artifacts/ at the repository root.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("INFERPROF_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(e2etest.RepoRoot(), ".artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser starts headless chromium with a fresh profile and no network
// of its own, and records console messages (calls of the console API,
// uncaught exceptions, browser log entries) and every URL the page requests.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	messages []string
	urls     []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	console := chromedp.Console(ctx)
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, fmt.Sprintf("%s: %s %s:%d", m.Type, m.Text, m.URL, m.Line))
			b.mu.Unlock()
		}
	})
	wg.Go(func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.urls = append(b.urls, ev.Request.URL)
			b.mu.Unlock()
		}
	})
	t.Cleanup(func() { cancel(); cancelAlloc(); wg.Wait() })
	return b
}

// check fails on any console error or warning, and on any request that left
// the collector's origin.
func (b *browser) check(t *testing.T, origin string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var bad []string
	for _, m := range b.messages {
		if strings.HasPrefix(m, "error:") || strings.HasPrefix(m, "warning:") || strings.HasPrefix(m, "exception:") {
			bad = append(bad, m)
		}
	}
	assert.Empty(t, bad, "the page wrote errors to the console; all messages: %v", b.messages)
	require.NotEmpty(t, b.urls)
	for _, u := range b.urls {
		assert.Truef(t, strings.HasPrefix(u, origin+"/") || strings.HasPrefix(u, "data:"), "the page loaded %s from elsewhere", u)
	}
}

// attr reads an attribute of the first element matching sel.
func attr(ctx context.Context, sel, name string) (string, error) {
	v, err := chromedp.Run(ctx, chromedp.Evaluate[*string](
		fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.getAttribute(%q) : null; })()`, sel, name)))
	if err != nil {
		return "", err
	}
	if v == nil {
		return "", fmt.Errorf("%s has no %s", sel, name)
	}
	return *v, nil
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err)
	return strings.TrimSpace(s)
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	require.NoError(t, err)
	return n
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoErrorf(t, err, "%q is a number", s)
	return v
}

// TestDashboardInBrowser opens the dashboard of the shipped default config,
// fed with known traffic, in headless Chromium: it waits for the charts,
// checks the figures in the DOM against what was sent, opens the slowest
// request's timeline, saves a screenshot and fails on any console error.
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	c, ports, sockDir := startShipped(t)
	tr := feedTraffic(t, ports, sockDir)
	addr := ports.Addr("ui")
	waitForTraffic(t, c, addr, tr)
	origin := "http://" + addr

	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(origin+"/"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-ttft svg circle`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-phases svg rect`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-goodput svg rect`)),
		chromedp.WaitVisible(chromedp.CSS(`#gpus .gpu svg`)),
	))

	total, failed, good := tr.counts()
	v, err := attr(ctx, "#tile-requests", "data-value")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(total), v, "requests tile")
	assert.Equal(t, fmt.Sprintf("%d", total), strings.ReplaceAll(text(t, ctx, "#tile-requests .value"), ",", ""))
	v, err = attr(ctx, "#tile-errors", "data-value")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(failed), v, "failed requests tile")
	v, err = attr(ctx, "#tile-goodput", "data-value")
	require.NoError(t, err)
	wantGoodput := 100 * float64(good) / float64(total-failed)
	assert.InDelta(t, wantGoodput, num(t, v), 1e-3, "goodput tile")
	assert.Equal(t, fmt.Sprintf("%.1f %%", wantGoodput), text(t, ctx, "#tile-goodput .value"))
	assert.Contains(t, text(t, ctx, "#targets"), "TTFT ≤ 2.00 s")
	assert.Contains(t, text(t, ctx, "#targets"), "TPOT ≤ 100 ms")

	// Every chart's figures, against what was sent.
	checkLatencyCharts(t, ctx, addr, tr.engine, tr)
	checkStackedCharts(t, ctx, tr)
	checkSlowest(t, ctx, tr)

	// Kernels: each kernel's GPU time is what was streamed.
	for _, k := range tr.kernels {
		v, err = attr(ctx, fmt.Sprintf(`#kernels tr[data-kernel=%q]`, k.short), "data-seconds")
		require.NoErrorf(t, err, "kernel %s listed", k.short)
		assert.InDeltaf(t, float64(k.n)*float64(k.dur)/1e9, num(t, v), 1e-9, "kernel %s", k.short)
		_, err = attr(ctx, fmt.Sprintf(`#categories .row[data-category=%q]`, k.category), "data-seconds")
		assert.NoErrorf(t, err, "category %s drawn", k.category)
	}

	// GPU: utilisation in percent, memory in GiB, power.
	sel := fmt.Sprintf(`#gpus .gpu[data-gpu=%q]`, tr.gpuUUID)
	v, err = attr(ctx, sel, "data-util")
	require.NoError(t, err)
	assert.InDelta(t, tr.util*100, num(t, v), 1e-9)
	v, err = attr(ctx, sel, "data-memory-gib")
	require.NoError(t, err)
	assert.InDelta(t, tr.memUsed/(1<<30), num(t, v), 1e-9)
	v, err = attr(ctx, sel, "data-power-w")
	require.NoError(t, err)
	assert.InDelta(t, tr.powerW, num(t, v), 1e-9)
	assert.Contains(t, text(t, ctx, sel+" .title"), tr.gpuName)

	// The slowest request's timeline opens below, its request outlined.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#slowest tbody tr:first-child a.view`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-timeline-ready="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#viewer svg rect.sel`)),
	))
	assert.Positive(t, count(t, ctx, "#viewer svg rect[data-name^='flash::'], #viewer svg rect[data-name^='sm90_'], #viewer svg rect[data-name^='vllm::']"),
		"kernels drawn on the GPU track")
	assert.GreaterOrEqual(t, count(t, ctx, "#viewer svg rect[data-name='prefill'], #viewer svg rect[data-name='decode'], #viewer svg rect[data-name='queue']"), 3,
		"the request's phases drawn")

	screenshot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	out := filepath.Join(artifactDir(t), "dashboard.png")
	require.NoError(t, os.WriteFile(out, screenshot, 0o644))
	t.Logf("screenshot: %s (%d bytes)", out, len(screenshot))

	b.check(t, origin)
}
