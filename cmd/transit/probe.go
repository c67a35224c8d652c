package main

import (
	"context"
	"fmt"
	"os"

	"transit/config"
	"transit/service"
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
	if _, err := service.AskServe(ctx, *addr, path); err != nil {
		return fmt.Errorf("--addr %s: %w", *addr, err)
	}
	return nil
}
