package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// spawnThread starts every child process. Linux delivers a parent-death
// signal when the *thread* that forked the child exits, and the Go runtime may
// retire threads; a goroutine locked to its thread that never returns keeps
// that thread, and so the children, alive exactly as long as this program.
var spawnThread = sync.OnceValue(func() chan<- spawnRequest {
	requests := make(chan spawnRequest)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread must outlive every child.
		for r := range requests {
			r.done <- r.cmd.Start()
		}
	}()
	return requests
})

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// process is one running control plane component.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	// base are the arguments of the component's first start (Restart
	// overrides some); nil until it is restarted.
	base []string
}

// startProcess runs binary with args, writing its output to logPath. The child
// gets SIGKILL if this program dies first.
func startProcess(name, binary, logPath string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log for %s: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error, 1)
	spawnThread() <- spawnRequest{cmd: cmd, done: done}
	if err := <-done; err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// running reports an error when the process has already exited.
func (p *process) running() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%w); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tail(p.logPath, 15))
	default:
		return nil
	}
}

// stop asks the process to terminate and kills it after grace.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.exited
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
