package service_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
)

// /readyz answers 503, naming what failed, while the emulators cannot be
// reached, and 200 again once they can; /healthz answers 200 throughout.
func TestOps_readyz_follows_the_emulators_and_healthz_stays_up(t *testing.T) {
	addr := freeAddr(t)
	s := newStack(t, func(c *config.Config) { c.HTTPAddr = addr })
	n := newNetwork(t)
	s.serveWith(n.service(s))
	base := "http://" + addr

	waitStatus(t, base+"/readyz", http.StatusOK, 30*time.Second)
	code, _ := get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	n.cut()
	body := waitStatus(t, base+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	assert.Contains(t, body, "not ready")
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code, "alive while AWS is unreachable")

	require.NoError(t, n.restore())
	waitStatus(t, base+"/readyz", http.StatusOK, 30*time.Second)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitStatus polls url until it answers want, and returns that answer's body.
func waitStatus(t *testing.T, url string, want int, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := get(t, url)
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d within %s, last %d %s", url, want, within, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
