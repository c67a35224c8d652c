package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dynamoDBLocalPackage is the npm package that carries DynamoDB Local 1.25
// (AWS's own engine) in its emulator/ folder. It is pinned so every machine
// runs the same engine; npm is just the one registry CI can reach.
const dynamoDBLocalPackage = "amplify-dynamodb-simulator@2.9.30"

// dynamoDBLocalSubdir is where, under the cache dir, the package's
// emulator/ folder (DynamoDBLocal.jar and DynamoDBLocal_lib/) is kept.
const dynamoDBLocalSubdir = "dynamodb-local-2.9.30"

// DefaultCacheDir is where InstallDynamoDBLocal keeps its download between
// runs: $TRANSIT_CACHE_DIR if set, else <user cache dir>/transit, else
// .cache/transit under the working directory (for a machine without HOME).
func DefaultCacheDir() string {
	if dir := os.Getenv("TRANSIT_CACHE_DIR"); dir != "" {
		return dir
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "transit")
	}
	return filepath.Join(".cache", "transit")
}

// InstallDynamoDBLocal returns the folder holding DynamoDBLocal.jar under
// cacheDir, installing the npm package there first if it is missing (which
// needs npm on PATH and access to the npm registry).
//
// Safe to call from several processes at once, e.g. parallel test
// packages: installs are serialised by a lock file in cacheDir, and each
// one happens in a temporary folder that is renamed into place only when
// complete, so a killed install never leaves a half-extracted package that
// passes the DynamoDBLocal.jar check.
func InstallDynamoDBLocal(ctx context.Context, cacheDir string) (dir string, err error) {
	dir = filepath.Join(cacheDir, dynamoDBLocalSubdir)
	jar := filepath.Join(dir, "DynamoDBLocal.jar")
	// The common case, without taking the lock.
	if _, err := os.Stat(jar); err == nil {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("install DynamoDB Local: npm not found on PATH (install Node.js and npm so %s can be fetched, or place DynamoDBLocal.jar and DynamoDBLocal_lib/ in %s): %w",
			dynamoDBLocalPackage, dir, err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("install DynamoDB Local: create cache dir: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(cacheDir, ".dynamodblocal.lock"))
	if err != nil {
		return "", fmt.Errorf("install DynamoDB Local: %w", err)
	}
	defer unlock()
	// Whoever held the lock before us may have installed it already.
	if _, err := os.Stat(jar); err == nil {
		return dir, nil
	}

	tmp, err := os.MkdirTemp(cacheDir, "npm-pack-")
	if err != nil {
		return "", fmt.Errorf("install DynamoDB Local: %w", err)
	}
	defer os.RemoveAll(tmp)
	// npm pack fetches the package's own tarball only: the jar without the
	// 280 MB of JavaScript dependencies an install would bring.
	var out bytes.Buffer
	pack := exec.CommandContext(ctx, npm, "pack", "--silent", "--pack-destination", tmp, dynamoDBLocalPackage)
	pack.Stdout, pack.Stderr = &out, &out
	if err := pack.Run(); err != nil {
		return "", fmt.Errorf("install DynamoDB Local: npm pack %s: %w\n%s", dynamoDBLocalPackage, err, lastLines(out.String(), 20))
	}
	tarballs, _ := filepath.Glob(filepath.Join(tmp, "*.tgz"))
	if len(tarballs) != 1 {
		return "", fmt.Errorf("install DynamoDB Local: npm pack %s left %d tarballs", dynamoDBLocalPackage, len(tarballs))
	}
	out.Reset()
	untar := exec.CommandContext(ctx, "tar", "-xzf", tarballs[0], "-C", tmp, "package/emulator")
	untar.Stdout, untar.Stderr = &out, &out
	if err := untar.Run(); err != nil {
		return "", fmt.Errorf("install DynamoDB Local: unpack %s: %w\n%s", tarballs[0], err, lastLines(out.String(), 20))
	}
	if _, err := os.Stat(filepath.Join(tmp, "package", "emulator", "DynamoDBLocal.jar")); err != nil {
		return "", fmt.Errorf("install DynamoDB Local: %s has no emulator/DynamoDBLocal.jar: %w", dynamoDBLocalPackage, err)
	}
	// A folder without the jar is left over from something else; replace it.
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("install DynamoDB Local: remove incomplete %s: %w", dir, err)
	}
	if err := os.Rename(filepath.Join(tmp, "package", "emulator"), dir); err != nil {
		return "", fmt.Errorf("install DynamoDB Local: move into %s: %w", dir, err)
	}
	return dir, nil
}

// lockFile takes an exclusive flock on path, waiting for other processes
// until ctx ends. flock rather than an O_EXCL marker file because the
// kernel drops it when its holder dies, so a killed test run cannot leave
// a stale lock behind.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lastLines keeps an error message readable when npm prints pages of output.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// DynamoDBLocal is a running DynamoDB Local, reached on 127.0.0.1.
//
// It keeps its tables in memory (they are gone after Stop) and in one
// shared database, so every client sees the same tables whatever access
// key and region it signs with.
type DynamoDBLocal struct {
	// URL is the endpoint, e.g. http://127.0.0.1:41234.
	URL string

	cmd      *exec.Cmd
	exited   chan struct{} // closed once the process has been reaped
	stopOnce sync.Once
}

// StartDynamoDBLocal starts DynamoDB Local from dir (the folder returned by
// InstallDynamoDBLocal) on a free port and waits until it answers HTTP.
// logPath, when set, receives its output. Needs java (11 or later) on PATH.
func StartDynamoDBLocal(ctx context.Context, dir, logPath string) (*DynamoDBLocal, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("start DynamoDB Local: java not found on PATH (install a JRE, 11 or later): %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "DynamoDBLocal.jar")); err != nil {
		return nil, fmt.Errorf("start DynamoDB Local: no DynamoDBLocal.jar in %s (see InstallDynamoDBLocal): %w", dir, err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("start DynamoDB Local: pick a port: %w", err)
	}
	// -sharedDb: without it DynamoDB Local keeps a separate database per
	// access key and region, so a table created by one client is invisible
	// to another that signs differently. -disableTelemetry: the machine has
	// no internet, and tests should not report anywhere anyway.
	cmd := exec.Command(java, "-Djava.library.path=DynamoDBLocal_lib", "-jar", "DynamoDBLocal.jar",
		"-inMemory", "-sharedDb", "-port", strconv.Itoa(port), "-disableTelemetry")
	// The jar finds DynamoDBLocal_lib/ (SQLite's native library) relative
	// to the working directory.
	cmd.Dir = dir
	// Its own process group, so Stop also ends anything the JVM forks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logFile *os.File
	// Without a log, keep the start of its output so a failed start can
	// say why (a port taken, a bad Java version).
	startOutput := &cappedBuffer{max: 16 << 10}
	if logPath != "" {
		logFile, err = os.Create(logPath)
		if err != nil {
			return nil, fmt.Errorf("start DynamoDB Local: create log: %w", err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
	} else {
		cmd.Stdout, cmd.Stderr = startOutput, startOutput
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("start DynamoDB Local: %w", err)
	}
	d := &DynamoDBLocal{
		URL:    fmt.Sprintf("http://127.0.0.1:%d", port),
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		close(d.exited)
	}()

	// Any HTTP response means it is serving: a POST of {} without a target
	// gets a 400, which is all we need to know.
	client := &http.Client{Timeout: 2 * time.Second}
	const timeout = 60 * time.Second
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			if logPath != "" {
				return nil, fmt.Errorf("start DynamoDB Local: java exited at start (%v); its output is in %s", waitErr, logPath)
			}
			return nil, fmt.Errorf("start DynamoDB Local: java exited at start (%v):\n%s", waitErr, startOutput.String())
		case <-ctx.Done():
			d.Stop()
			return nil, fmt.Errorf("start DynamoDB Local: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := client.Post(d.URL, "application/x-amz-json-1.0", strings.NewReader("{}"))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return d, nil
		}
	}
	d.Stop()
	return nil, fmt.Errorf("start DynamoDB Local: no answer on %s within %s", d.URL, timeout)
}

// Stop kills the server and its process group and waits until it has
// exited, so its port is free again when Stop returns. Calling it more
// than once is harmless.
func (d *DynamoDBLocal) Stop() {
	d.stopOnce.Do(func() {
		if d.cmd.Process != nil {
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		}
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			// SIGKILL cannot be ignored; this only guards against a
			// process stuck in the kernel holding up a test run forever.
		}
	})
}

// cappedBuffer keeps the first max bytes written to it and drops the rest,
// so an unlogged server that runs for hours cannot grow memory.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	// Report everything as written: dropping output must not fail the server.
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
