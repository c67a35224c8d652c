package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"transit/internal/agent"
	"transit/messages"
)

// runAgent runs the reference agent: it leases the org's tasks and works
// on each with a shell command (internal/agent).
func runAgent(ctx context.Context, args []string) error {
	cfg := agent.Config{Version: agentVersion()}
	var capabilities string
	svc, fs, err := setup(ctx, "agent", args, func(fs *flag.FlagSet) {
		fs.StringVar(&cfg.OrgID, "org", "", "the org whose tasks to lease (required)")
		fs.StringVar(&cfg.AgentID, "agent", "", "this agent's ID (required)")
		fs.StringVar(&cfg.Exec, "exec", "", "the shell command that works on a task, run with sh -c (required); it gets the task in TRANSIT_TASK_ID, TRANSIT_TASK_PROMPT, TRANSIT_TASK_TITLE, TRANSIT_PROJECT_ID and TRANSIT_TASK_MODEL, a stdout line \"?? QUESTION\" asks the task's user, and the answer comes on stdin")
		fs.StringVar(&cfg.Dir, "dir", "", "the command's working directory (default: the current one)")
		fs.StringVar(&capabilities, "capabilities", "", "comma-separated capabilities to announce, e.g. interactive,go")
		fs.DurationVar(&cfg.Heartbeat, "heartbeat", 30*time.Second, "heartbeat interval; a heartbeat renews the running task's lease")
		fs.DurationVar(&cfg.Poll, "poll", 5*time.Second, "wait before leasing again when there was nothing to lease")
		fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "how long to wait for transit to answer a command")
		fs.BoolVar(&cfg.Once, "once", false, "run one task and exit (at once, with status 0, when there is none)")
	})
	if err != nil {
		return err
	}
	if cfg.OrgID == "" || cfg.AgentID == "" || cfg.Exec == "" || fs.NArg() > 0 {
		return errors.New("usage: transit agent --org O --agent A --exec CMD [--dir D] [--capabilities C,…] [--once]")
	}
	if cfg.Heartbeat <= 0 || cfg.Poll <= 0 || cfg.Timeout <= 0 {
		return fmt.Errorf("--heartbeat %s, --poll %s, --timeout %s: each must be more than 0", cfg.Heartbeat, cfg.Poll, cfg.Timeout)
	}
	for _, c := range strings.Split(capabilities, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cfg.Capabilities = append(cfg.Capabilities, c)
		}
	}
	cfg.Logger = svc.Logger
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	topic, err := svc.TopicARN(ctx, svc.Stack.EventTopic(messages.Task))
	if err != nil {
		return err
	}
	bus, err := agent.OpenSQS(ctx, agent.SQSConfig{SQS: svc.SQS, SNS: svc.SNS, Stack: svc.Stack, TopicARN: topic,
		OrgID: cfg.OrgID, AgentID: cfg.AgentID, Logger: svc.Logger})
	if err != nil {
		return fmt.Errorf("open the agent's queue: %w", err)
	}
	svc.Logger.Info("agent: listening", "queue", agent.QueueName(svc.Stack, cfg.OrgID, cfg.AgentID), "org_id", cfg.OrgID, "agent_id", cfg.AgentID)
	// Run returns on SIGINT or SIGTERM too: the queue goes either way.
	return errors.Join(a.Run(ctx, bus), bus.Close(ctx))
}

// agentVersion is what heartbeats say the agent is: transit's module
// version and, when built from a checkout, its commit.
func agentVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "transit"
	}
	v := "transit " + info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
