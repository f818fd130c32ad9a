// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var launcherBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "inferprof-run-test")
	if err != nil {
		panic(err)
	}
	// The launches of this package's tests write their engines' scrape
	// targets here, not where a collector on this machine reads them.
	os.Setenv(envTargetsDir, filepath.Join(dir, "engines")) //nolint:usetesting // for every test and the launchers they start
	launcherBin = filepath.Join(dir, "inferprof-run")
	build := exec.Command("go", "build", "-o", launcherBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// launcher is the built inferprof-run running sh -c script under
// supervision, its error records going to logs (a dead port when empty).
func launcher(t *testing.T, logs string, flags []string, script string) *exec.Cmd {
	t.Helper()
	if logs == "" {
		logs = "127.0.0.1:1"
	}
	args := append([]string{"-quiet", "-no-hook", "-no-cupti", "-logs-endpoint", logs}, flags...)
	args = append(args, "sh", "-c", script)
	cmd := exec.Command(launcherBin, args...)
	cmd.Dir = t.TempDir()
	return cmd
}

func exitOf(t *testing.T, err error) *exec.ExitError {
	t.Helper()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "want an exit error, got %v", err)
	return ee
}

func TestSuperviseExitCodes(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, 1, 2, 3, 77, 255} {
		cmd := launcher(t, "", nil, "exit "+itoa(code))
		err := cmd.Run()
		if code == 0 {
			require.NoError(t, err)
			continue
		}
		assert.Equal(t, code, exitOf(t, err).ExitCode())
	}
}

// TestSuperviseDiesOfTheEngineSignal: the launcher dies of the signal the
// engine died of, so its parent sees what it would have seen with exec.
func TestSuperviseDiesOfTheEngineSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1} {
		err := launcher(t, "", nil, "kill -"+strings.TrimPrefix(signalName(int(sig)), "SIG")+" $$").Run()
		ws := exitOf(t, err).Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled(), "%s: %v", sig, err)
		assert.Equal(t, sig, ws.Signal())
	}
	// Core-dumping signals end in 128+n (supervise.go, coreSignals).
	err := launcher(t, "", nil, "ulimit -c 0; kill -SEGV $$").Run()
	assert.Equal(t, 128+int(syscall.SIGSEGV), exitOf(t, err).ExitCode())
}

// TestSuperviseForwardsSignals: every signal sent to the launcher reaches
// the engine once; one that ignores SIGTERM keeps running, and so does the
// launcher, until a signal it does act on.
func TestSuperviseForwardsSignals(t *testing.T) {
	t.Parallel()
	script := `trap 'echo got TERM' TERM; trap 'echo got HUP' HUP; trap 'echo got USR2' USR2; trap 'echo got WINCH' WINCH; trap 'exit 5' USR1
echo ready
while :; do sleep 0.05; done`
	cmd := launcher(t, "", nil, script)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 16)
	go func() {
		b := make([]byte, 4096)
		var acc string
		for {
			n, err := out.Read(b)
			acc += string(b[:n])
			for {
				i := strings.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	require.Equal(t, "ready", <-lines)
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR2, syscall.SIGWINCH} {
		require.NoError(t, cmd.Process.Signal(s))
		select {
		case l := <-lines:
			assert.Equal(t, "got "+strings.TrimPrefix(signalName(int(s)), "SIG"), l)
		case <-time.After(10 * time.Second):
			t.Fatalf("%v not forwarded", s)
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGUSR1))
	assert.Equal(t, 5, exitOf(t, cmd.Wait()).ExitCode(), "it ran on after SIGTERM, ended by USR1")
}

// TestSupervisePassesOutputThrough: binary stdout and stderr, lines or
// not, arrive byte for byte on the launcher's own.
func TestSupervisePassesOutputThrough(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outData := make([]byte, 4<<20)
	_, _ = rand.Read(outData)
	errData := []byte(strings.Repeat("(APIServer pid=1) ERROR 12-01 10:00:00 [x.py:1] boom\r\n\x00\xff no newline", 5000))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "out"), outData, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "err"), errData, 0o600))
	cmd := launcher(t, "", nil, "cat "+dir+"/out; cat "+dir+"/err >&2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run())
	assert.Equal(t, sha256.Sum256(outData), sha256.Sum256(stdout.Bytes()))
	assert.Equal(t, sha256.Sum256(errData), sha256.Sum256(stderr.Bytes()))
}

// TestSuperviseOrphanHoldingOutput: an orphan that keeps the engine's
// stdout and stderr open (vLLM's EngineCore after a kill -9 of the API
// server) does not keep the launcher alive; it is sent SIGTERM with the
// rest of the engine's process group.
func TestSuperviseOrphanHoldingOutput(t *testing.T) {
	t.Parallel()
	cmd := launcher(t, "", nil, `sh -c 'trap "echo orphan stopped; exit 0" TERM; : > trapped; while :; do sleep 0.05; done' &
while [ ! -e trapped ]; do sleep 0.01; done; exit 3`)
	var out bytes.Buffer
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		assert.Equal(t, 3, exitOf(t, err).ExitCode())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("an orphan holding the output kept the launcher alive")
	}
	assert.Contains(t, out.String(), "orphan stopped", "the orphan got SIGTERM")
}

// reaperScript orphans a grandchild that exits at once, then waits for it
// to be reaped: its /proc entry stays, a zombie, until its new parent
// waits for it. That parent is the launcher (subreaper, or PID 1).
const reaperScript = `(sh -c 'echo $$ > gc.pid' &)
while [ ! -s gc.pid ]; do sleep 0.01; done
gc=$(cat gc.pid)
while [ -e /proc/$gc ]; do sleep 0.01; done
echo reaped $gc`

func TestSuperviseReapsOrphansAsSubreaper(t *testing.T) {
	t.Parallel()
	cmd := launcher(t, "", nil, reaperScript)
	done := make(chan []byte)
	go func() { b, _ := cmd.Output(); done <- b }()
	select {
	case b := <-done:
		assert.Contains(t, string(b), "reaped")
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the orphan was never reaped")
	}
}

// TestSuperviseAsPID1 runs the launcher as PID 1 of a new PID namespace
// (unprivileged, through a user namespace): it reaps, and a signal death
// ends in 128+n, since the kernel ignores a default-action signal that
// init sends itself.
func TestSuperviseAsPID1(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	// --mount-proc: the namespace's own /proc, where the script looks for
	// its orphan by the pid it knows.
	ns := []string{"--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc"}
	probe := exec.Command(unshare, append(ns, "sh", "-c", "echo $$")...)
	if out, err := probe.Output(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Skipf("unprivileged PID namespaces unavailable here: %v %s", err, out)
	}
	run := func(script string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, unshare, append(ns,
			launcherBin, "-quiet", "-no-hook", "-no-cupti", "-logs-endpoint", "127.0.0.1:1", "sh", "-c", script)...)
		cmd.Dir = t.TempDir()
		return cmd.Output()
	}
	out, err := run(`echo launcher=$PPID; ` + reaperScript)
	require.NoError(t, err)
	assert.Contains(t, string(out), "launcher=1\n")
	assert.Contains(t, string(out), "reaped")

	_, err = run("kill -KILL $$")
	assert.Equal(t, 128+9, exitOf(t, err).ExitCode())
	_, err = run("exit 4")
	assert.Equal(t, 4, exitOf(t, err).ExitCode())
}

// TestExecFlagReplacesTheLauncher: with -exec the command has the
// launcher's pid.
func TestExecFlagReplacesTheLauncher(t *testing.T) {
	t.Parallel()
	cmd := launcher(t, "", []string{"-exec"}, "echo $$")
	var out bytes.Buffer
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	require.NoError(t, cmd.Wait())
	assert.Equal(t, itoa(pid), strings.TrimSpace(out.String()))

	cmd = launcher(t, "", nil, "echo $$")
	out.Reset()
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	pid = cmd.Process.Pid
	require.NoError(t, cmd.Wait())
	assert.NotEqual(t, itoa(pid), strings.TrimSpace(out.String()), "supervised: the engine is a child")
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestSuperviseEngineEndsWithAKilledLauncher: a kill -9 of the launcher
// (an OOM kill, a container runtime's escalation) does not leave the
// engine running unsupervised in its own process group: the kernel sends it
// SIGTERM (Pdeathsig), and it stops as on a plain stop.
func TestSuperviseEngineEndsWithAKilledLauncher(t *testing.T) {
	t.Parallel()
	cmd := launcher(t, "", nil, `trap 'echo engine stopped > stopped; exit 0' TERM; echo $$ > engine.pid; while :; do sleep 0.05; done`)
	require.NoError(t, cmd.Start())
	pidFile := filepath.Join(cmd.Dir, "engine.pid")
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
			return false
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "the engine started")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(cmd.Dir, "stopped"))
		return err == nil && strings.Contains(string(b), "engine stopped")
	}, 20*time.Second, 10*time.Millisecond, "the engine got SIGTERM when its launcher was killed")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie waiting for init to reap it.
		return err != nil || strings.Contains(string(b), ") Z ")
	}, 20*time.Second, 10*time.Millisecond, "the engine exited")
}
