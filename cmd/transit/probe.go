package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"transit/config"
)

// runProbe asks a running serve whether it is alive or ready, for a
// container health check where no curl is at hand (the image is
// distroless): exit 0 when it answers 200.
func runProbe(ctx context.Context, args []string) error {
	fs := newFlagSet("probe")
	def := "127.0.0.1:9090"
	// The container's own setting, so a health check follows it.
	if v := os.Getenv("TRANSIT_HTTP_ADDR"); v != "" && v != config.HTTPOff {
		def = v
	}
	addr := fs.String("addr", def, "serve's TRANSIT_HTTP_ADDR [$TRANSIT_HTTP_ADDR]")
	ready := fs.Bool("ready", false, "ask /readyz (default /healthz)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	host := *addr
	if strings.HasPrefix(host, ":") {
		host = "127.0.0.1" + host
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
