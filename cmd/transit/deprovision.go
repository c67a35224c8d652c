package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"transit/store"
)

// runDeprovision removes a stack. Its data goes with its tables, so it
// names what it would delete and does nothing without --yes.
func runDeprovision(ctx context.Context, args []string) error {
	var yes bool
	svc, _, err := setup(ctx, "deprovision", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&yes, "yes", false, "delete the stack named by --prefix: its tables (and their items), queues (and their messages), topics and subscriptions")
	})
	if err != nil {
		return err
	}
	prefix := svc.Config.Prefix
	if !yes {
		fmt.Printf("stack %q has\n  tables: %s\n  queues: %s\n  topics: %s (and their subscriptions)\n",
			prefix, strings.Join(store.TableNames(prefix), ", "), strings.Join(svc.Stack.Queues(), ", "), strings.Join(svc.Stack.Topics(), ", "))
		return fmt.Errorf("refusing to delete stack %q and its data without --yes", prefix)
	}
	if err := svc.Deprovision(ctx); err != nil {
		return err
	}
	fmt.Printf("deprovisioned stack %q\n", prefix)
	return nil
}
