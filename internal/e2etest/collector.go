// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2etest is the end-to-end harness: it builds otelcol-inferprof once
// per test run, starts it on free loopback ports with a config written by the
// test, and stops it by PID, checking that it exited cleanly.
package e2etest // import "github.com/inferprof/inferprof/internal/e2etest"

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"
)

// readyLine is what the collector logs once every pipeline has started.
const readyLine = "Everything is ready"

// StartTimeout bounds how long a collector may take to become ready.
const StartTimeout = 60 * time.Second

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RepoRoot returns the repository root, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binary returns the path of the built collector. INFERPROF_BIN names a
// binary already built (make test sets it); otherwise `make build` runs
// once per test process.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("INFERPROF_BIN"); p != "" {
			binPath = p
			_, buildErr = os.Stat(p)
			return
		}
		root := RepoRoot()
		cmd := exec.Command("make", "-C", root, "build")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("make build: %w\n%s", err, out)
			return
		}
		binPath = filepath.Join(root, "bin", "otelcol-inferprof")
	})
	require.NoError(tb, buildErr)
	return binPath
}

// Ports are drawn below Linux's ephemeral range (32768-60999 by default), so
// the outgoing connections of this or another test cannot take a port in the
// moment between FreePort releasing it and the collector binding it; within
// one process no port is handed out twice.
const (
	portLow  = 20000
	portHigh = 32000
)

var (
	portMu   sync.Mutex
	portUsed = map[int]bool{}
)

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 200 {
		port := portLow + rand.IntN(portHigh-portLow)
		if portUsed[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		portUsed[port] = true
		return port
	}
	tb.Fatalf("no free loopback port in [%d, %d) after 200 tries", portLow, portHigh)
	return 0
}

// Ports hands out one free loopback port per name, the same port each time a
// name is asked for again, so a config template and the test agree.
type Ports struct {
	tb    testing.TB
	mu    sync.Mutex
	ports map[string]int
}

// NewPorts returns an empty port book.
func NewPorts(tb testing.TB) *Ports {
	return &Ports{tb: tb, ports: map[string]int{}}
}

// Port returns the port for name.
func (p *Ports) Port(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if port, ok := p.ports[name]; ok {
		return port
	}
	port := FreePort(p.tb)
	p.ports[name] = port
	return port
}

// Addr returns "127.0.0.1:<port>" for name.
func (p *Ports) Addr(name string) string {
	return "127.0.0.1:" + strconv.Itoa(p.Port(name))
}

// Render fills a config template. It offers {{port "name"}}, {{addr "name"}}
// and {{.Dir}}, a per-test temporary folder.
func Render(tb testing.TB, ports *Ports, dir, text string) string {
	tb.Helper()
	tmpl, err := template.New("config").Funcs(template.FuncMap{
		"port": ports.Port,
		"addr": ports.Addr,
	}).Parse(text)
	require.NoError(tb, err)
	var b bytes.Buffer
	require.NoError(tb, tmpl.Execute(&b, struct{ Dir string }{dir}))
	return b.String()
}

// Options start a collector.
type Options struct {
	// Config is the YAML config, already rendered. Ignored when ConfigFiles is set.
	Config string
	// ConfigFiles are passed as --config flags in order, for testing shipped configs.
	ConfigFiles []string
	// Args are extra command-line arguments.
	Args []string
	// Env holds extra environment variables, KEY=VALUE.
	Env []string
	// Wrapper, when set, is a command the binary runs under (its arguments
	// then the binary and its own); it must exec the binary in its place, so
	// PID, Stop and Kill reach the collector.
	Wrapper []string
}

// Collector is a running otelcol-inferprof process.
type Collector struct {
	tb     testing.TB
	cmd    *exec.Cmd
	out    *syncBuffer
	ready  chan struct{}
	exited chan struct{}
	err    error // set before exited is closed
	Dir    string
}

// Start runs the collector and waits until it logs that it is ready. The
// collector is stopped, and its exit checked, when the test ends.
func Start(tb testing.TB, opts Options) *Collector {
	tb.Helper()
	c := Launch(tb, opts)
	select {
	case <-c.ready:
	case <-c.exited:
		tb.Fatalf("collector exited before it was ready: %v\n%s", c.err, c.Output())
	case <-time.After(StartTimeout):
		tb.Fatalf("collector not ready after %s\n%s", StartTimeout, c.Output())
	}
	tb.Cleanup(func() {
		if !c.Exited() {
			c.Stop()
		}
	})
	return c
}

// Launch runs the collector without waiting for it to become ready; use it
// for configs that must fail. The process is killed when the test ends if it
// is still running.
func Launch(tb testing.TB, opts Options) *Collector {
	tb.Helper()
	dir := tb.TempDir()
	args := []string{}
	if len(opts.ConfigFiles) == 0 {
		cfg := filepath.Join(dir, "config.yaml")
		require.NoError(tb, os.WriteFile(cfg, []byte(opts.Config), 0o600))
		args = append(args, "--config", cfg)
	}
	for _, f := range opts.ConfigFiles {
		args = append(args, "--config", f)
	}
	args = append(args, opts.Args...)
	argv := append([]string{Binary(tb)}, args...)
	if len(opts.Wrapper) > 0 {
		argv = append(append([]string{}, opts.Wrapper...), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), opts.Env...)
	c := &Collector{
		tb: tb, cmd: cmd, out: &syncBuffer{},
		ready: make(chan struct{}), exited: make(chan struct{}), Dir: dir,
	}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	require.NoError(tb, cmd.Start())
	scanned := make(chan struct{})
	go func() {
		c.scan(pr)
		close(scanned)
	}()
	go func() {
		c.err = cmd.Wait()
		_ = pw.Close()
		// Exited means all its output is in Output(): a test that reads
		// the error a failed start printed must not race the scanner.
		<-scanned
		close(c.exited)
	}()
	tb.Cleanup(func() {
		if !c.Exited() {
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if tb.Failed() {
			tb.Logf("collector output:\n%s", c.Output())
		}
	})
	return c
}

func (c *Collector) scan(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	once := sync.Once{}
	for s.Scan() {
		line := s.Text()
		c.out.WriteLine(line)
		if strings.Contains(line, readyLine) {
			once.Do(func() { close(c.ready) })
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// PID returns the collector's process id.
func (c *Collector) PID() int { return c.cmd.Process.Pid }

// Output returns everything the collector printed so far.
func (c *Collector) Output() string { return c.out.String() }

// Exited reports whether the process has ended.
func (c *Collector) Exited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// Wait waits for the process to end on its own and returns its exit code.
func (c *Collector) Wait(timeout time.Duration) int {
	c.tb.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		c.tb.Fatalf("collector still running after %s\n%s", timeout, c.Output())
	}
	return exitCode(c.err)
}

// Stop sends SIGTERM to the collector's PID and checks that it shut down
// cleanly: exit status 0 within 30 seconds.
//
// The collector subscribes to SIGTERM just after it logs that it is ready,
// so a test exchanges data with it (which it does anyway) before stopping it.
func (c *Collector) Stop() {
	c.tb.Helper()
	require.NoError(c.tb, syscall.Kill(c.PID(), syscall.SIGTERM))
	code := c.Wait(30 * time.Second)
	require.Equalf(c.tb, 0, code, "collector exit status after SIGTERM\n%s", c.Output())
}

// Kill ends the collector with SIGKILL, as a crash would.
func (c *Collector) Kill() {
	c.tb.Helper()
	require.NoError(c.tb, syscall.Kill(c.PID(), syscall.SIGKILL))
	c.Wait(30 * time.Second)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) WriteLine(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(line)
	s.b.WriteByte('\n')
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }
