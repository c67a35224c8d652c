// Package emulator starts a local AWS emulator (moto server) for tests,
// `make run` and benchmarks, so none of them needs anything started by hand;
// or, for the tests, finds the one the user runs (TRANSIT_TEST_ENDPOINT),
// and names test stacks so that what a run leaves behind can be found.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Moto is a running moto server on 127.0.0.1.
type Moto struct {
	// URL is the endpoint, e.g. http://127.0.0.1:41234.
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
}

// StartMoto starts moto_server (or `python3 -m moto.server`) on a free
// loopback port and waits until it answers. logPath, when set, receives
// its output.
func StartMoto(ctx context.Context, logPath string) (*Moto, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-H", "127.0.0.1", "-p", strconv.Itoa(port)}
	var cmd *exec.Cmd
	if path, err := exec.LookPath("moto_server"); err == nil {
		cmd = exec.Command(path, args...)
	} else {
		cmd = exec.Command("python3", append([]string{"-m", "moto.server"}, args...)...)
	}
	// Its own process group, so Stop also ends any worker it forks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m := &Moto{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, exited: make(chan struct{})}
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr, m.log = f, f, f
	}
	if err := cmd.Start(); err != nil {
		m.closeLog()
		return nil, fmt.Errorf("start moto server (install it with pip install 'moto[server]'): %w", err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		m.closeLog()
		close(m.exited)
		exited <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("moto server exited at start: %v", err)
		case <-ctx.Done():
			m.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(m.URL + "/moto-api/"); err == nil {
			resp.Body.Close()
			return m, nil
		}
	}
	m.Stop()
	return nil, errors.New("moto server did not answer within 30s")
}

// Stop ends the server and waits until it has exited, so its port is free.
func (m *Moto) Stop() {
	if m.cmd.Process != nil {
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
	}
}

func (m *Moto) closeLog() {
	if m.log != nil {
		_ = m.log.Close()
	}
}

// FreePort is a loopback TCP port nobody listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
