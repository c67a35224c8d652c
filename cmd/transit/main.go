// Command transit turns commands on SQS into DynamoDB transitions and
// events on SNS. Run `transit help` for its subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	"tail":          {"tail task --org O TASK_ID   a task's events and log lines, following until it ends", runTail},
	"agent":         {"agent --org O --agent A --exec CMD [--once]   the reference agent: lease the org's tasks, run each with CMD", runAgent},
	"provider-stub": {"provider-stub [--listen ADDR]   a local stand-in for the sandbox provider", runProviderStub},
	"schema":        {"schema [--type T] [--out DIR]   JSON Schemas of the envelope, every command and every event", runSchema},
}

func main() {
	if len(os.Args) < 2 || subcommands[os.Args[1]].run == nil {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := subcommands[os.Args[1]].run(ctx, os.Args[2:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "transit "+os.Args[1]+":", err)
		}
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: transit SUBCOMMAND [flags]   (each subcommand takes -h)")
	for _, name := range []string{"serve", "provision", "deprovision", "send", "watch", "dlq", "query", "audit", "tail", "agent", "provider-stub", "schema"} {
		fmt.Fprintln(os.Stderr, "  "+subcommands[name].usage)
	}
}
