// Command transit turns commands on SQS into DynamoDB transitions and
// events on SNS. Run `transit help` for its subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type subcommand struct {
	usage string
	run   func(ctx context.Context, args []string) error
}

var subcommands = map[string]subcommand{
	"serve":         {"serve                       consume commands until SIGTERM, then drain", runServe},
	"provision":     {"provision                   create tables, queues, DLQs, topics and subscriptions (idempotent)", runProvision},
	"deprovision":   {"deprovision --yes           delete the stack --prefix names: tables, queues, topics, subscriptions", runDeprovision},
	"send":          {"send TYPE [--json J | --FIELD V ...] [--wait]   send a command; --wait prints its event", runSend},
	"watch":         {"watch [--domain D,…] [--type T] [--count N] [--timeout T]   print events as they are published", runWatch},
	"dlq":           {"dlq list|redrive [--domain D]   show or move back dead-lettered commands", runDLQ},
	"query":         {"query sandboxes|layers|builds|timers|shards|tasks|agents|notifications|accounts|schedules|schedule|resources [flags]   the documented access patterns, from the indexes", runQuery},
	"audit":         {"audit entity KIND#ID | recent [--since T]   an entity's history, or the newest records of every domain", runAudit},
	"trace":         {"trace CORRELATION_ID [--json]   a correlation's causal chain: each command under its cause, with times, outcomes, events", runTrace},
	"status":        {"status [--addr A] [--json]   queue, in-flight and DLQ depths, shard and lease owners, a serve's last minute", runStatus},
	"tail":          {"tail task --org O TASK_ID   a task's events and log lines, following until it ends", runTail},
	"agent":         {"agent --org O --agent A --exec CMD [--once]   the reference agent: lease the org's tasks, run each with CMD", runAgent},
	"provider-stub": {"provider-stub [--listen ADDR]   a local stand-in for the sandbox provider", runProviderStub},
	"schema":        {"schema [--type T] [--out DIR]   JSON Schemas of the envelope, every command and every event", runSchema},
	"probe":         {"probe [--ready] [--addr A]   exit 0 if a running serve is alive (/healthz) or ready (/readyz)", runProbe},
}

// stderr takes usage, errors and the flag sets' messages; tests replace it.
var stderr io.Writer = os.Stderr

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the subcommand args name and returns the exit status: 2 and
// the usage for no or an unknown subcommand, 1 for a failure, which it
// prints after the subcommand's name.
func run(ctx context.Context, args []string) int {
	if len(args) == 0 || subcommands[args[0]].run == nil {
		usage()
		return 2
	}
	if err := subcommands[args[0]].run(ctx, args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "transit "+args[0]+":", err)
		}
		return 1
	}
	return 0
}

func usage() {
	fmt.Fprintln(stderr, "usage: transit SUBCOMMAND [flags]   (each subcommand takes -h)")
	for _, name := range []string{"serve", "provision", "deprovision", "send", "watch", "dlq", "query", "audit", "trace", "status", "tail", "agent", "provider-stub", "schema", "probe"} {
		fmt.Fprintln(stderr, "  "+subcommands[name].usage)
	}
}

// newFlagSet is a subcommand's flag set: errors returned, not fatal, and
// its messages (a bad flag, -h) on stderr.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("transit "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
