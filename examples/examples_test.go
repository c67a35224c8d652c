// Package examples_test runs the producer examples in examples/python and
// examples/node as a producer would, against `transit serve` on moto, so
// an example that no longer works fails `make test`.
package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"transit/internal/emulator"
)

var (
	// endpoint serves every AWS API: TRANSIT_TEST_ENDPOINT, else a moto
	// server started here.
	endpoint string
	// transitBin is built once from this tree: the examples are checked
	// against the code they ship with.
	transitBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	endpoint = emulator.Endpoint()
	if endpoint == "" {
		moto, err := emulator.StartMoto(ctx, os.Getenv("TRANSIT_TEST_MOTO_LOG"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "the examples' test needs moto server:", err)
			return 1
		}
		defer moto.Stop()
		endpoint = moto.URL
	}
	dir, err := os.MkdirTemp("", "transit-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	transitBin = filepath.Join(dir, "transit")
	build := exec.Command("go", "build", "-o", transitBin, "./cmd/transit")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/transit: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// example is one language's example and how to run it.
type example struct {
	name string
	// ready skips the test when the language's runtime is missing and
	// installs the example's dependencies when they are absent.
	ready func(t *testing.T)
	dir   string
	cmd   []string
}

var examples = []example{
	{name: "python", ready: pythonReady, dir: "python", cmd: []string{"python3", "send_commands.py"}},
	{name: "node", ready: nodeReady, dir: "node", cmd: []string{"node", "send_commands.mjs"}},
}

func pythonReady(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	if out, err := exec.Command("python3", "-c", "import boto3").CombinedOutput(); err != nil {
		t.Skipf("boto3 is not installed for python3: %s", out)
	}
}

func nodeReady(t *testing.T) {
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed", bin)
		}
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules")); err == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	install.Dir = "node"
	out, err := install.CombinedOutput()
	require.NoError(t, err, "npm ci in examples/node:\n%s", out)
}

// Each example sends sandbox.sync as an envelope, sandbox.allocate as a
// bare payload with its type in an attribute, and sandbox.mark-deletion
// through the commands topic, and exits 0 only once every event has come
// back on its own queue with the right causation and correlation.
func TestExamples_against_serve(t *testing.T) {
	env := provision(t)
	serve(t, env)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ex.ready(t)
			out, err := runExample(t, ex, env)
			require.NoError(t, err, "%s example failed:\n%s", ex.name, out)
			for _, event := range []string{"<- sandbox.synced", "<- sandbox.allocated", "<- sandbox.deletion-marked"} {
				require.Contains(t, out, event, "output:\n%s", out)
			}
		})
	}
}

// With nothing serving the stack, each example says which event did not
// come and exits non-zero: a producer's script can rely on its status.
func TestExamples_fail_when_no_event_comes(t *testing.T) {
	env := append(provision(t), "TRANSIT_EXAMPLE_TIMEOUT=2")
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ex.ready(t)
			out, err := runExample(t, ex, env)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "output:\n%s", out)
			require.Equal(t, 1, exit.ExitCode(), "output:\n%s", out)
			require.Contains(t, out, "error: no sandbox.synced for command", "output:\n%s", out)
		})
	}
}

// provision creates a stack of its own, deleted when the test ends, and
// returns the environment of its producers: only the AWS settings given
// here, none the caller may have set.
func provision(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "TRANSIT_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"AWS_ENDPOINT_URL="+endpoint, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"TRANSIT_PREFIX="+emulator.TestPrefix+uuid.NewString()[:8],
	)
	transit(t, env, "provision")
	// Registered before serve's clean-up, so it runs after serve stopped.
	t.Cleanup(func() { transit(t, env, "deprovision", "--yes") })
	return env
}

// transit runs a transit subcommand to completion.
func transit(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(transitBin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "transit %s:\n%s", strings.Join(args, " "), out)
}

// serve runs `transit serve` on the stack until the test ends; a serve
// that stops by itself fails the test with its log.
func serve(t *testing.T, env []string) {
	t.Helper()
	var log syncBuffer
	cmd := exec.Command(transitBin, "serve")
	// No sandbox provider: none of the examples' commands calls it.
	cmd.Env = append(env, "TRANSIT_LOG_LEVEL=warn", "TRANSIT_HTTP_ADDR=127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-exited:
			t.Errorf("transit serve stopped by itself (%v):\n%s", err, log.String())
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("transit serve exited with %v on SIGTERM:\n%s", err, log.String())
			} else if t.Failed() {
				t.Logf("transit serve's log:\n%s", log.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("transit serve did not stop within 30s of SIGTERM:\n%s", log.String())
		}
	})
}

// runExample runs one example with env and returns its output (stdout and
// stderr together).
func runExample(t *testing.T, ex example, env []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ex.cmd[0], ex.cmd[1:]...)
	cmd.Dir = ex.dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// syncBuffer is a bytes.Buffer a process writes to while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
