package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
)

// runTrace prints a correlation's causal chain from the recorded
// outcomes: each command under the one that caused it, with its time,
// entity, outcome and events.
func runTrace(ctx context.Context, args []string) error {
	var (
		limit  int
		asJSON bool
	)
	svc, fs, err := setup(ctx, "trace", args, func(fs *flag.FlagSet) {
		fs.IntVar(&limit, "max", 1000, "read at most this many outcomes (1 to 100000)")
		fs.BoolVar(&asJSON, "json", false, "print the tree as JSON")
	})
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: transit trace CORRELATION_ID [--max N] [--json]")
	}
	if limit < 1 || limit > 100000 {
		return fmt.Errorf("--max: %d, want 1 to 100000", limit)
	}
	trace, err := svc.Trace(ctx, fs.Arg(0), limit)
	if err != nil {
		return err
	}
	if len(trace.Roots) == 0 {
		return fmt.Errorf("no recorded outcome of correlation %s (outcomes are kept TRANSIT_AUDIT_RETENTION)", fs.Arg(0))
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(trace)
	}
	return trace.WriteText(os.Stdout)
}
