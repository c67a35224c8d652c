package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"transit/store"
)

// queryAccounts lists every account by name (GSI1, TYPE#ACCOUNT).
func queryAccounts(ctx context.Context, args []string) error {
	svc, _, err := setup(ctx, "query accounts", args, nil)
	if err != nil {
		return err
	}
	accounts, err := svc.Store.Accounts(ctx)
	if err != nil {
		return err
	}
	w := table("ACCOUNT_NAME", "ACCOUNT_ID", "STATUS", "LAST_TEST_RUN_AT", "ROLE_ARN")
	for _, a := range accounts {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", a.AccountName, a.AccountID, a.Status, dash(a.LastTestRunAt), a.RoleARN)
	}
	return w.Flush()
}

// querySchedules lists every schedule by name (GSI1, TYPE#SCHEDULE).
func querySchedules(ctx context.Context, args []string) error {
	svc, _, err := setup(ctx, "query schedules", args, nil)
	if err != nil {
		return err
	}
	schedules, err := svc.Store.Schedules(ctx)
	if err != nil {
		return err
	}
	w := table("SCHEDULE_NAME", "SCHEDULE_ID", "ENABLED", "START_CRON", "END_CRON", "TIMEZONE", "NEXT_START_AT", "NEXT_STOP_AT", "RESOURCES")
	for _, s := range schedules {
		fmt.Fprintf(w, "%s\t%s\t%t\t%s\t%s\t%s\t%s\t%s\t%d\n", s.ScheduleName, s.ScheduleID, s.Enabled, s.StartCron, s.EndCron,
			s.Timezone, dash(s.NextStartAt), dash(s.NextStopAt), s.ResourceCount)
	}
	return w.Flush()
}

// querySchedule shows one schedule with its resources: one query of its
// partition.
func querySchedule(ctx context.Context, args []string) error {
	svc, fs, err := setup(ctx, "query schedule", args, nil)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: transit query schedule SCHEDULE_ID")
	}
	s, resources, found, err := svc.Store.GetSchedule(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("no schedule %s", fs.Arg(0))
	}
	w := table("SCHEDULE_NAME", "SCHEDULE_ID", "ENABLED", "START_CRON", "END_CRON", "TIMEZONE", "NEXT_START_AT", "NEXT_STOP_AT")
	fmt.Fprintf(w, "%s\t%s\t%t\t%s\t%s\t%s\t%s\t%s\n", s.ScheduleName, s.ScheduleID, s.Enabled, s.StartCron, s.EndCron,
		s.Timezone, dash(s.NextStartAt), dash(s.NextStopAt))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println()
	return printResources(resources)
}

// queryResources lists every resource of an account (GSI1, ACCOUNT#<id>).
func queryResources(ctx context.Context, args []string) error {
	var account string
	svc, _, err := setup(ctx, "query resources", args, func(fs *flag.FlagSet) {
		fs.StringVar(&account, "account", "", "the AWS account ID whose resources to list (required)")
	})
	if err != nil {
		return err
	}
	if account == "" {
		return errors.New("query resources: --account is required")
	}
	resources, err := svc.Store.AccountResources(ctx, account)
	if err != nil {
		return err
	}
	return printResources(resources)
}

func printResources(resources []store.TargetedResource) error {
	w := table("SCHEDULE_ID", "RESOURCE_TYPE", "REGION", "STATE", "LAST_STATUS", "LAST_EXECUTED_AT", "RESOURCE_ARN", "LAST_ERROR")
	for _, r := range resources {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ScheduleID, r.ResourceType, r.Region, dash(r.ExecutionState),
			dash(r.LastStatus), dash(r.LastExecutedAt), r.ResourceARN, dash(r.LastError))
	}
	return w.Flush()
}

// runAudit prints an entity's history, or the global view's recent
// records, from both trails merged.
func runAudit(ctx context.Context, args []string) error {
	usage := errors.New("usage: transit audit entity KIND#ID [--limit N] [--after CURSOR] | recent [--since T] [--limit N]")
	if len(args) == 0 {
		return usage
	}
	switch args[0] {
	case "entity":
		return auditEntity(ctx, args[1:])
	case "recent":
		return auditRecent(ctx, args[1:])
	}
	return usage
}

func auditEntity(ctx context.Context, args []string) error {
	var page pageFlags
	svc, fs, err := setup(ctx, "audit entity", args, page.bind)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: transit audit entity KIND#ID (SCHEDULE#sch-1, ACCOUNT#123456789012, SANDBOX#<id>, TASK#<org>/<id> …)")
	}
	if err := page.check(); err != nil {
		return err
	}
	history, err := svc.Store.EntityHistory(ctx, fs.Arg(0), int32(page.limit), page.after)
	if err != nil {
		return err
	}
	if err := printAudit(history.Items); err != nil {
		return err
	}
	printNext(history.Next)
	return nil
}

func auditRecent(ctx context.Context, args []string) error {
	var (
		since string
		limit int
	)
	svc, _, err := setup(ctx, "audit recent", args, func(fs *flag.FlagSet) {
		fs.StringVar(&since, "since", "1h", "records from this RFC 3339 time, or this long ago (a duration), on")
		fs.IntVar(&limit, "limit", 50, "at most this many, newest first (1 to 1000)")
	})
	if err != nil {
		return err
	}
	if limit < 1 || limit > 1000 {
		return fmt.Errorf("--limit: %d, want 1 to 1000", limit)
	}
	start, err := time.Parse(time.RFC3339, since)
	if err != nil {
		ago, derr := time.ParseDuration(since)
		if derr != nil || ago < 0 {
			return fmt.Errorf("--since: %q is neither an RFC 3339 time nor a duration such as 24h", since)
		}
		start = time.Now().Add(-ago)
	}
	records, err := svc.Store.RecentAudit(ctx, start, int32(limit))
	if err != nil {
		return err
	}
	return printAudit(records)
}

func printAudit(records []store.AuditRecord) error {
	w := table("AT", "ENTITY", "ACTION", "STATUS", "USER", "COMMAND_ID", "DETAILS")
	for _, r := range records {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.At, r.Entity, r.Action, r.Status, dash(r.UserID), r.CommandID, dash(r.Details+r.Reason))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(records) == 0 {
		fmt.Fprintln(os.Stderr, "no records")
	}
	return nil
}
