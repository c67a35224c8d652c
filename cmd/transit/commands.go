package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"transit/console"

	"github.com/google/uuid"

	"transit/config"
	"transit/messages"
	"transit/provider"
	"transit/service"
	"transit/store"
	"transit/transport"
)

// setup parses the settings common to every subcommand plus the
// subcommand's own flags, and builds the service.
func setup(ctx context.Context, name string, args []string, own func(*flag.FlagSet)) (*service.Service, *flag.FlagSet, error) {
	fs := newFlagSet(name)
	var cfg config.Config
	binder := config.Bind(fs, &cfg)
	if own != nil {
		own(fs)
	}
	if err := parseInterleaved(fs, args); err != nil {
		return nil, nil, err
	}
	if err := binder.Resolve(&cfg, os.LookupEnv); err != nil {
		return nil, nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	svc, err := service.New(ctx, cfg)
	return svc, fs, err
}

// parseInterleaved parses flags before and after the positional
// arguments (`transit trace ID --json`), which the flag package stops at;
// fs.Args() are then the positional ones. "--" still ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 || len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// runServe serves until SIGTERM. cmd/transit-bench's bench-serve runs
// the same two calls, metered: keep them alike.
func runServe(ctx context.Context, args []string) error {
	svc, _, err := setup(ctx, "serve", args, nil)
	if err != nil {
		return err
	}
	defer flushTraces(svc)
	c, err := console.New(svc, console.Options{Token: svc.Config.ConsoleToken, Logger: svc.Logger})
	if err != nil {
		return err
	}
	return svc.Serve(ctx, service.ServeOptions{Console: c.Serving})
}

// flushTraces exports the spans still buffered (docs/operations.md, Tracing)
// before transit exits. It has its own few seconds: the command's context
// has usually ended (SIGTERM). Spans that cannot be sent are reported, not
// a failure of the command.
func flushTraces(svc *service.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := svc.FlushTraces(ctx); err != nil {
		svc.Logger.Warn("traces not exported", "error", err)
	}
}

// runProvision creates the stack or, with --cloudformation, writes the
// template of the same stack instead (docs/deploy.md).
func runProvision(ctx context.Context, args []string) error {
	var template bool
	svc, _, err := setup(ctx, "provision", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&template, "cloudformation", false, "write a CloudFormation template (JSON) of the stack and of transit's runtime IAM policy to stdout, and provision nothing")
	})
	if err != nil {
		return err
	}
	if template {
		out, err := svc.CloudFormation()
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	}
	if err := svc.Provision(ctx); err != nil {
		return err
	}
	fmt.Printf("provisioned stack %q\n", svc.Config.Prefix)
	return nil
}

func runSend(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("usage: transit send TYPE [flags]; types: %v", commandTypes())
	}
	t := messages.Type(args[0])
	payload, ok := messages.NewCommandPayload(t)
	if !ok {
		return fmt.Errorf("unknown command type %q; types: %v", t, commandTypes())
	}
	var raw, id string
	var wait bool
	var timeout time.Duration
	svc, _, err := setup(ctx, "send", args[1:], func(fs *flag.FlagSet) {
		fs.StringVar(&raw, "json", "", "the payload as a JSON object")
		fs.StringVar(&id, "id", "", "command ID (default: a new UUID); resending an ID is deduplicated")
		fs.BoolVar(&wait, "wait", false, "wait for the command's first event and print it")
		fs.DurationVar(&timeout, "timeout", 30*time.Second, "how long --wait waits")
		payloadFlags(fs, payload)
	})
	if err != nil {
		return err
	}
	// The send's publish span starts the command's trace.
	defer flushTraces(svc)
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), payload); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if id == "" {
		id = uuid.NewString()
	}
	if err := checkCommand(id, t, payload); err != nil {
		return err
	}
	d, _ := messages.DomainOf(t)
	var tap *service.Tap
	if wait {
		if tap, err = svc.NewTap(ctx, id, d); err != nil {
			return err
		}
		defer tap.Close(ctx)
	}
	if err := svc.Send(ctx, id, t, payload); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sent %s %s\n", t, id)
	if !wait {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		events, err := tap.Receive(ctx, int32(min(5, max(1, time.Until(deadline)/time.Second))))
		if err != nil {
			return err
		}
		if len(events) > 0 {
			out, _ := json.MarshalIndent(events[0].Envelope, "", "  ")
			fmt.Println(string(out))
			return nil
		}
	}
	return fmt.Errorf("no event for %s within %s", id, timeout)
}

// checkCommand validates the command as transit will when it receives
// it, so that a command it would dead-letter is not sent: the error names
// the field at fault (a missing --track_id: "sandbox.allocate: invalid
// track_id: ...").
func checkCommand(id string, t messages.Type, payload any) error {
	body, err := messages.NewCommand(id, t, payload, time.Now())
	if err != nil {
		return err
	}
	if _, err := messages.Decode(body, messages.Meta{Type: string(t)}); err != nil {
		return fmt.Errorf("not sent: %w", err)
	}
	return nil
}

// payloadFlags adds a --field flag for every string or number field of a
// payload struct (embedded structs included), except where a setting has
// the name already (--region): those go through --json.
func payloadFlags(fs *flag.FlagSet, payload any) {
	addFieldFlags(fs, reflect.ValueOf(payload).Elem())
}

func addFieldFlags(fs *flag.FlagSet, v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		if sf.Anonymous && f.Kind() == reflect.Struct {
			addFieldFlags(fs, f)
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if fs.Lookup(name) != nil {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			fs.Func(name, "payload field "+name, func(s string) error { f.SetString(s); return nil })
		case reflect.Int, reflect.Int64:
			fs.Func(name, "payload field "+name, func(s string) error {
				n, err := strconv.ParseInt(s, 10, 64)
				f.SetInt(n)
				return err
			})
		}
	}
}

func commandTypes() []messages.Type {
	var ts []messages.Type
	for _, d := range messages.Domains() {
		ts = append(ts, messages.Commands(d)...)
	}
	return ts
}

// runWatch prints the events of some domains as they are published.
func runWatch(ctx context.Context, args []string) error {
	var domains, eventType string
	var count int
	var timeout time.Duration
	svc, _, err := setup(ctx, "watch", args, func(fs *flag.FlagSet) {
		fs.StringVar(&domains, "domain", "sandbox,layer", "comma-separated domains whose events to print")
		fs.StringVar(&eventType, "type", "", "stop counting only at events of this type")
		fs.IntVar(&count, "count", 0, "exit after this many events (0: run until Ctrl-C or --timeout)")
		fs.DurationVar(&timeout, "timeout", 0, "exit with an error if --count events have not come by then")
	})
	if err != nil {
		return err
	}
	var ds []messages.Domain
	for _, d := range strings.Split(domains, ",") {
		ds = append(ds, messages.Domain(strings.TrimSpace(d)))
	}
	tap, err := svc.NewTap(ctx, "", ds...)
	if err != nil {
		return err
	}
	defer tap.Close(ctx)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	fmt.Fprintf(os.Stderr, "watching %s events\n", domains)
	seen := 0
	for ctx.Err() == nil {
		events, err := tap.Receive(ctx, 5)
		if err != nil {
			break
		}
		for _, ev := range events {
			out, _ := json.Marshal(ev.Envelope)
			fmt.Println(string(out))
			if eventType == "" || string(ev.Envelope.Type) == eventType {
				seen++
			}
			if count > 0 && seen >= count {
				return nil
			}
		}
	}
	if count > 0 {
		return fmt.Errorf("%d of %d events within %s", seen, count, timeout)
	}
	return nil
}

func runDLQ(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "redrive") {
		return errors.New("usage: transit dlq list|redrive [--domain D] [--max N]")
	}
	action := args[0]
	domain := string(messages.Sandbox)
	maxMessages := 100
	svc, _, err := setup(ctx, "dlq "+action, args[1:], func(fs *flag.FlagSet) {
		fs.StringVar(&domain, "domain", domain, "the domain whose DLQ to read")
		fs.IntVar(&maxMessages, "max", maxMessages, "at most this many messages")
	})
	if err != nil {
		return err
	}
	d := messages.Domain(domain)
	dlqURL, err := queueURL(ctx, svc, svc.Stack.DeadLetterQueue(d))
	if err != nil {
		return err
	}
	if action == "redrive" {
		target, err := queueURL(ctx, svc, svc.Stack.CommandQueue(d))
		if err != nil {
			return err
		}
		n, err := transport.Redrive(ctx, svc.SQS, dlqURL, target, maxMessages, nil)
		fmt.Printf("redrove %d message(s) to %s\n", n, svc.Stack.CommandQueue(d))
		return err
	}
	letters, err := transport.ListDeadLetters(ctx, svc.SQS, dlqURL, maxMessages)
	if err != nil {
		return err
	}
	for _, l := range letters {
		out, _ := json.Marshal(map[string]any{"message_id": l.MessageID, "type": l.Attributes[messages.TypeAttribute], "reason": l.Reason, "body": l.Body})
		fmt.Println(string(out))
	}
	fmt.Fprintf(os.Stderr, "%d message(s) in %s\n", len(letters), svc.Stack.DeadLetterQueue(d))
	return nil
}

func queueURL(ctx context.Context, svc *service.Service, name string) (string, error) {
	url, err := svc.QueueURL(ctx, name)
	if err != nil {
		return "", fmt.Errorf("%w (run transit provision first?)", err)
	}
	return url, nil
}

func runQuery(ctx context.Context, args []string) error {
	usage := errors.New("usage: transit query sandboxes [--status S] [--track T] | layers [--layer-region R] [--package P] | builds [--package P] | timers [--shard N] [--due-before T] | shards | tasks --org O --project P|--agent A, or --state S | agents [--status S] [--org O] | notifications --user U | accounts | schedules | schedule SCHEDULE_ID | resources --account A")
	if len(args) == 0 {
		return usage
	}
	switch args[0] {
	case "sandboxes":
		return querySandboxes(ctx, args[1:])
	case "layers":
		return queryLayers(ctx, args[1:])
	case "builds":
		return queryBuilds(ctx, args[1:])
	case "timers":
		return queryTimers(ctx, args[1:])
	case "shards":
		return queryShards(ctx, args[1:])
	case "tasks":
		return queryTasks(ctx, args[1:])
	case "agents":
		return queryAgents(ctx, args[1:])
	case "notifications":
		return queryNotifications(ctx, args[1:])
	case "accounts":
		return queryAccounts(ctx, args[1:])
	case "schedules":
		return querySchedules(ctx, args[1:])
	case "schedule":
		return querySchedule(ctx, args[1:])
	case "resources":
		return queryResources(ctx, args[1:])
	}
	return usage
}

func querySandboxes(ctx context.Context, args []string) error {
	var status, track string
	svc, _, err := setup(ctx, "query sandboxes", args, func(fs *flag.FlagSet) {
		fs.StringVar(&status, "status", "", "only this status (available, allocated, pending_deletion, cleanup_stuck, stale)")
		fs.StringVar(&track, "track", "", "only what this track holds (TrackIndex)")
	})
	if err != nil {
		return err
	}
	sbs, err := svc.Store.Sandboxes(ctx, status)
	if track != "" {
		sbs, err = svc.Store.TrackSandboxes(ctx, track)
	}
	if err != nil {
		return err
	}
	w := table("SANDBOX_ID", "NAME", "STATUS", "TRACK", "ALLOCATED_AT", "RETRIES")
	for _, sb := range sbs {
		at := "-"
		if sb.AllocatedAt > 0 {
			at = time.Unix(sb.AllocatedAt, 0).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", sb.SandboxID, sb.Name, sb.Status, sb.AllocatedToTrack, at, sb.DeletionRetryCount)
	}
	return w.Flush()
}

// queryLayers answers the layer access patterns of docs/layers.md (--region is the
// AWS region setting, hence --layer-region): with a region and
// a package, the latest version there (the pointer); with a package, its
// latest version in every region; with a region, every deployed version.
func queryLayers(ctx context.Context, args []string) error {
	var region, pkg string
	svc, _, err := setup(ctx, "query layers", args, func(fs *flag.FlagSet) {
		fs.StringVar(&region, "layer-region", "", "layers deployed in this region")
		fs.StringVar(&pkg, "package", "", "layers of this package")
	})
	if err != nil {
		return err
	}
	var vs []store.LayerVersion
	switch {
	case region != "" && pkg != "":
		v, found, err := svc.Store.LatestLayer(ctx, region, pkg)
		if err != nil || !found {
			return errors.Join(err, fmt.Errorf("no layer of %s in %s", pkg, region))
		}
		v.Status = store.LayerLatest
		vs = []store.LayerVersion{v}
	case pkg != "":
		vs, err = svc.Store.LatestLayers(ctx, pkg)
	case region != "":
		vs, err = svc.Store.RegionLayers(ctx, region)
	default:
		return errors.New("--layer-region, --package or both")
	}
	if err != nil {
		return err
	}
	w := table("REGION", "PACKAGE", "VERSION", "STATUS", "ARN")
	for _, v := range vs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", v.Region, v.Package, v.Version, v.Status, v.ARN)
	}
	return w.Flush()
}

// queryBuilds lists the latest build (and requirements hash) of one
// package or of every package.
func queryBuilds(ctx context.Context, args []string) error {
	var pkg string
	svc, _, err := setup(ctx, "query builds", args, func(fs *flag.FlagSet) {
		fs.StringVar(&pkg, "package", "", "only this package")
	})
	if err != nil {
		return err
	}
	var bs []store.Build
	if pkg != "" {
		b, found, err := svc.Store.LatestBuild(ctx, pkg)
		if err != nil || !found {
			return errors.Join(err, fmt.Errorf("no build of %s", pkg))
		}
		bs = []store.Build{b}
	} else if bs, err = svc.Store.LatestBuilds(ctx); err != nil {
		return err
	}
	w := table("PACKAGE", "VERSION", "REQUIREMENTS_HASH")
	for _, b := range bs {
		fmt.Fprintf(w, "%s\t%d\t%s\n", b.Package, b.Version, b.RequirementsHash)
	}
	return w.Flush()
}

// queryTimers lists stored timers by due time, from ExecuteAtIndex: of
// one shard or of every shard (TRANSIT_TIMER_SHARDS of them).
func queryTimers(ctx context.Context, args []string) error {
	shard := -1
	var dueBefore string
	svc, _, err := setup(ctx, "query timers", args, func(fs *flag.FlagSet) {
		fs.IntVar(&shard, "shard", -1, "only this shard (default: every shard)")
		fs.StringVar(&dueBefore, "due-before", "", "only timers due before this RFC 3339 time (default: all)")
	})
	if err != nil {
		return err
	}
	before := time.Now().AddDate(100, 0, 0)
	if dueBefore != "" {
		if before, err = time.Parse(time.RFC3339Nano, dueBefore); err != nil {
			return fmt.Errorf("--due-before: %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", dueBefore)
		}
	}
	shards := []int{shard}
	if shard < 0 {
		shards = make([]int, svc.Config.TimerShards)
		for i := range shards {
			shards[i] = i
		}
	} else if shard >= svc.Config.TimerShards {
		return fmt.Errorf("--shard: %d, want 0 to %d (TRANSIT_TIMER_SHARDS - 1)", shard, svc.Config.TimerShards-1)
	}
	w := table("SHARD", "EXECUTE_AT", "TIMER_ID", "TIMER_UUID", "ATTEMPTS", "CALLBACK")
	for _, sh := range shards {
		ts, err := svc.Store.DueTimers(ctx, sh, before)
		if err != nil {
			return err
		}
		for _, t := range ts {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\n", t.ShardID, t.ExecuteAt, t.ID, t.UUID, t.Attempts, t.CallbackURL)
		}
	}
	return w.Flush()
}

// queryShards lists the timer shards' owners and versions.
func queryShards(ctx context.Context, args []string) error {
	svc, _, err := setup(ctx, "query shards", args, nil)
	if err != nil {
		return err
	}
	shards, err := svc.Store.Shards(ctx, svc.Config.TimerShards)
	if err != nil {
		return err
	}
	w := table("SHARD", "VERSION", "OWNER", "CLAIMED_AT")
	for _, sh := range shards {
		owner, at := sh.Owner, sh.ClaimedAt.String()
		if sh.Version == 0 {
			owner, at = "-", "-"
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", sh.ShardID, sh.Version, owner, at)
	}
	return w.Flush()
}

func table(columns ...string) *tabwriter.Writer {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(columns, "\t"))
	return w
}

func runProviderStub(ctx context.Context, args []string) error {
	fs := newFlagSet("provider-stub")
	listen := fs.String("listen", "127.0.0.1:8089", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv := &http.Server{Addr: *listen, Handler: provider.NewStub(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	fmt.Fprintf(os.Stderr, "provider stub on http://%s\n", *listen)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
