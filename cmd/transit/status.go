package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
)

// runStatus prints one screen of the stack's state: each served domain's
// queue, in-flight and DLQ depths with the oldest dead letter's reason,
// the owners of the timer shards and stream leases, and the last
// minute's counts of the serve at --addr.
func runStatus(ctx context.Context, args []string) error {
	var (
		addr   string
		asJSON bool
	)
	svc, _, err := setup(ctx, "status", args, func(fs *flag.FlagSet) {
		fs.StringVar(&addr, "addr", "", "the serve to ask for its last minute's counts (default: TRANSIT_HTTP_ADDR's, on this host)")
		fs.BoolVar(&asJSON, "json", false, "print the status as JSON")
	})
	if err != nil {
		return err
	}
	if addr == "" {
		addr = svc.Config.HTTPAddr
	}
	st, err := svc.Status(ctx, addr, true)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return st.WriteText(os.Stdout)
}
