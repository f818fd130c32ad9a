// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/sys/unix"
)

// drainWait bounds how long, after the engine exits, the launcher reads
// output its children still write: an orphan holding the pipe open must
// not keep the launcher alive.
const drainWait = 2 * time.Second

// notForwarded are the signals the launcher keeps: SIGCHLD is its own
// (reaping), SIGURG is the Go runtime's preemption, SIGTTIN and SIGTTOU
// would stop the engine for the launcher's own terminal I/O, and SIGPIPE
// is the launcher's stdout closing, which a write error handles.
var notForwarded = map[syscall.Signal]bool{
	syscall.SIGCHLD: true, syscall.SIGURG: true, syscall.SIGTTIN: true, syscall.SIGTTOU: true, syscall.SIGPIPE: true,
}

// coreSignals dump core by default. The engine's core is written by the
// kernel already; re-raising one on the launcher would add the launcher's
// (and the Go runtime turns it into exit code 2 anyway), so for these the
// launcher exits 128+n, the shell's convention.
var coreSignals = map[syscall.Signal]bool{
	syscall.SIGQUIT: true, syscall.SIGILL: true, syscall.SIGTRAP: true, syscall.SIGABRT: true,
	syscall.SIGBUS: true, syscall.SIGFPE: true, syscall.SIGSEGV: true, syscall.SIGSYS: true, syscall.SIGXCPU: true, syscall.SIGXFSZ: true,
}

var signalNames = map[int]string{}

func init() {
	for n := 1; n < 65; n++ {
		if s := unix.SignalName(syscall.Signal(n)); s != "" {
			signalNames[n] = s
		}
	}
}

func signalName(n int) string {
	if s, ok := signalNames[n]; ok {
		return s
	}
	return "SIG" + strconv.Itoa(n)
}

// outcome is how the engine ended.
type outcome struct {
	code   int            // exit code, when it exited
	signal syscall.Signal // the signal it died of, else 0
}

// supervise runs the engine as the launcher's child and returns how it
// ended. Signals sent to the launcher go to the engine; as PID 1 or a
// subreaper it reaps every orphan that is reparented to it; the engine's
// stdout and stderr pass through pumps that hand a copy to a recogniser
// feeding the sink newSink makes for the engine's pid (newSink nil, or
// returning nil: the engine gets the launcher's own stdout and stderr).
func supervise(p *plan, stdout, stderr io.Writer, newSink func(pid int) *logSink) (outcome, error) {
	if os.Getpid() != 1 {
		// Orphans of the engine (its workers, after a kill -9) come to us
		// to be reaped, as they would to a container's init.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	defer signal.Stop(sigs)

	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	var readers, closers []*os.File
	if newSink != nil {
		for i := range 2 {
			r, w, err := os.Pipe()
			if err != nil {
				return outcome{}, err
			}
			files[i+1] = w
			readers, closers = append(readers, r), append(closers, w)
		}
	}
	// The engine is in a process group of its own, so a kill -9 of the
	// launcher alone would leave it running with no one to supervise it:
	// the kernel sends it SIGTERM when the launcher dies (vLLM and SGLang
	// shut their workers down on it). Pdeathsig fires when the thread that
	// started the child exits, so that thread stays locked to this
	// goroutine while the engine runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr := &os.ProcAttr{Env: p.env, Files: files, Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}}
	if foregroundTTY() {
		// The engine gets the terminal, so ^C reaches it once, from the
		// terminal, and not a second time from us.
		attr.Sys.Foreground, attr.Sys.Ctty = true, 0
	}
	proc, err := os.StartProcess(p.path, p.args, attr)
	for _, w := range closers {
		_ = w.Close()
	}
	if err != nil {
		for _, r := range readers {
			_ = r.Close()
		}
		return outcome{}, err
	}
	if p.onStart != nil {
		p.onStart(proc.Pid)
	}
	// Until the pumps start, output waits in the pipes (64 KiB each).
	var sink *logSink
	var pumps []*pump
	if newSink != nil {
		sink = newSink(proc.Pid)
		for i, dst := range []io.Writer{stdout, stderr} {
			var rec *recogniser
			if sink != nil {
				rec = &recogniser{stream: [...]string{"stdout", "stderr"}[i], emit: sink.emit}
			}
			pumps = append(pumps, startPump(readers[i], dst, rec))
		}
	}
	forwarded := map[syscall.Signal]bool{}
	tick := time.NewTicker(time.Second) // a SIGCHLD lost to a full channel
	defer tick.Stop()
	var ws unix.WaitStatus
	for done := false; !done; {
		select {
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if !notForwarded[sig] {
				if err := proc.Signal(sig); err == nil {
					forwarded[sig] = true
				}
			}
		case <-tick.C:
		}
		done = reap(proc.Pid, &ws)
	}

	// The engine's workers outlive it after a kill -9 (vLLM's EngineCore
	// does): stop what is left of its process group, as a container
	// runtime stops a container whose main process died.
	_ = unix.Kill(-proc.Pid, unix.SIGTERM)
	drain := time.NewTimer(drainWait)
	defer drain.Stop()
wait:
	for _, pm := range pumps {
		select {
		case <-pm.done:
		case <-drain.C:
			break wait
		}
	}
	if sink != nil {
		var skipped uint64
		for _, pm := range pumps {
			skipped += pm.skipped.Load()
		}
		how := attribute.Int(attrExitCode, ws.ExitStatus())
		if ws.Signaled() {
			how = attribute.String(attrExitSignal, signalName(int(ws.Signal())))
		}
		sink.final(finalEvent(ws, forwarded), how, attribute.Int64(attrSkipped, int64(skipped)))
		sink.shutdown()
	}
	if ws.Signaled() {
		return outcome{signal: ws.Signal()}, nil
	}
	return outcome{code: ws.ExitStatus()}, nil
}

// reap collects every child that has ended, orphans included, and reports
// whether the engine is one.
func reap(engine int, ws *unix.WaitStatus) bool {
	found := false
	for {
		var st unix.WaitStatus
		pid, err := unix.Wait4(-1, &st, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return found
		}
		if pid == engine {
			*ws, found = st, true
		}
	}
}

func finalEvent(ws unix.WaitStatus, forwarded map[syscall.Signal]bool) event {
	if ws.Signaled() {
		sig := ws.Signal()
		ev := event{kind: kindSignal, severity: sevError,
			body: fmt.Sprintf("engine killed by signal %s (%d)", signalName(int(sig)), int(sig))}
		if forwarded[sig] {
			// Stopped on request: the signal came to inferprof-run first.
			ev.severity, ev.body = sevWarn, ev.body+", sent to inferprof-run and forwarded"
		}
		if ws.CoreDump() {
			ev.body += ", core dumped"
		}
		return ev
	}
	ev := event{kind: kindExit, severity: sevError, body: "engine exited with code " + strconv.Itoa(ws.ExitStatus())}
	if ws.ExitStatus() == 0 {
		ev.severity = sevInfo
	}
	return ev
}

// exitLike ends the launcher the way the engine ended: its exit code, or
// its signal raised again on the launcher, so a parent's waitpid sees what
// it would have seen with exec (a shell's $? is 128+n either way). As PID 1
// (the kernel ignores a default-action signal sent to init) and for the
// signals that dump core, it exits 128+n.
func exitLike(o outcome) {
	if o.signal == 0 {
		os.Exit(o.code)
	}
	if os.Getpid() != 1 && !coreSignals[o.signal] {
		signal.Reset(o.signal)
		setDefaultAction(o.signal)
		_ = unix.Kill(os.Getpid(), o.signal)
		time.Sleep(time.Second) // delivery is asynchronous
	}
	os.Exit(128 + int(o.signal))
}

// foregroundTTY reports whether stdin is a terminal whose foreground
// process group is ours.
func foregroundTTY() bool {
	pg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64 (the
// Go runtime's sigactiont).
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// setDefaultAction gives sig the kernel's default action (SIG_DFL). The Go
// runtime keeps its own handler on every signal even after signal.Reset,
// and without a Notify it ignores SIGUSR1, SIGPIPE, SIGALRM and others, so
// re-raising one would not end the launcher.
func setDefaultAction(sig syscall.Signal) {
	var sa kernelSigaction // handler 0 is SIG_DFL
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0)
}
