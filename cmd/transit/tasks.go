package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"transit/machine"
	"transit/store"
)

// pageFlags are the flags of a paged listing: how many, from where.
type pageFlags struct {
	limit int
	after string
}

func (p *pageFlags) bind(fs *flag.FlagSet) {
	fs.IntVar(&p.limit, "limit", 50, "at most this many, newest first (1 to 1000)")
	fs.StringVar(&p.after, "after", "", "the cursor a previous page printed, to read the next")
}

func (p *pageFlags) check() error {
	if p.limit < 1 || p.limit > 1000 {
		return fmt.Errorf("--limit: %d, want 1 to 1000", p.limit)
	}
	return nil
}

// printNext tells how to read on, when there is more.
func printNext(next string) {
	if next != "" {
		fmt.Fprintf(os.Stderr, "more: --after %s\n", next)
	}
}

// queryTasks lists tasks of a project, of an agent or in a state, from
// project-tasks, agent-tasks or state-queue.
func queryTasks(ctx context.Context, args []string) error {
	var org, project, agent, state string
	var page pageFlags
	svc, _, err := setup(ctx, "query tasks", args, func(fs *flag.FlagSet) {
		fs.StringVar(&org, "org", "", "only this org's tasks (required with --project and --agent: their IDs are unique only within an org)")
		fs.StringVar(&project, "project", "", "the tasks of this project (project-tasks)")
		fs.StringVar(&agent, "agent", "", "the tasks this agent leased (agent-tasks)")
		fs.StringVar(&state, "state", "", "the tasks in this state (state-queue): "+strings.Join(machine.Task.States, ", "))
		page.bind(fs)
	})
	if err != nil {
		return err
	}
	if err := page.check(); err != nil {
		return err
	}
	var index, key string
	switch {
	case project != "" && agent == "" && state == "":
		index, key = store.ByProject, project
	case agent != "" && project == "" && state == "":
		index, key = store.ByAgent, agent
	case state != "" && project == "" && agent == "":
		if !slices.Contains(machine.Task.States, state) {
			return fmt.Errorf("--state: %q, want one of %s", state, strings.Join(machine.Task.States, ", "))
		}
		index, key = store.ByState, state
	default:
		return errors.New("query tasks: give exactly one of --project, --agent or --state")
	}
	if org == "" && index != store.ByState {
		return errors.New("query tasks: --project and --agent need --org: their IDs are unique only within an org")
	}
	tasks, err := svc.Store.ListTasks(ctx, org, index, key, int32(page.limit), page.after)
	if err != nil {
		return err
	}
	w := table("ORG", "TASK_ID", "STATE", "PRIORITY", "AGENT", "PROJECT", "UPDATED_AT", "TITLE")
	for _, t := range tasks.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", t.OrgID, t.TaskID, t.State, t.Priority, dash(t.AgentID), t.ProjectID, t.UpdatedAt, t.Title)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printNext(tasks.Next)
	return nil
}

// queryAgents lists agents by status from status-index, the most
// recently heard from first; without --status, each status in turn.
func queryAgents(ctx context.Context, args []string) error {
	var org, status string
	var page pageFlags
	svc, _, err := setup(ctx, "query agents", args, func(fs *flag.FlagSet) {
		fs.StringVar(&org, "org", "", "only this org's agents")
		fs.StringVar(&status, "status", "", "only this status: "+strings.Join(machine.Agent.States, ", "))
		page.bind(fs)
	})
	if err != nil {
		return err
	}
	if err := page.check(); err != nil {
		return err
	}
	statuses := machine.Agent.States
	if status != "" {
		if !slices.Contains(statuses, status) {
			return fmt.Errorf("--status: %q, want one of %s", status, strings.Join(statuses, ", "))
		}
		statuses = []string{status}
	} else if page.after != "" {
		return errors.New("query agents: --after needs --status (a cursor belongs to one status)")
	}
	w := table("ORG", "AGENT_ID", "STATUS", "LAST_HEARTBEAT", "HOST", "PID", "TASK", "VERSION")
	var next string
	for _, st := range statuses {
		agents, err := svc.Store.ListAgents(ctx, org, st, int32(page.limit), page.after)
		if err != nil {
			return err
		}
		for _, a := range agents.Items {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.OrgID, a.AgentID, a.Status, a.LastHeartbeatAt, a.Host, a.PID, dash(a.CurrentTaskID), a.Version)
		}
		next = agents.Next
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if status != "" {
		printNext(next)
	}
	return nil
}

// queryNotifications lists a user's notifications from
// user-notifications, newest first.
func queryNotifications(ctx context.Context, args []string) error {
	var user string
	var page pageFlags
	svc, _, err := setup(ctx, "query notifications", args, func(fs *flag.FlagSet) {
		fs.StringVar(&user, "user", "", "the user whose notifications to list (required)")
		page.bind(fs)
	})
	if err != nil {
		return err
	}
	if user == "" {
		return errors.New("query notifications: --user is required")
	}
	if err := page.check(); err != nil {
		return err
	}
	notes, err := svc.Store.ListNotifications(ctx, user, int32(page.limit), page.after)
	if err != nil {
		return err
	}
	w := table("CREATED_AT", "TYPE", "SEVERITY", "READ", "TASK", "NOTIFICATION_ID", "TITLE")
	for _, n := range notes.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", n.CreatedAt, n.Type, n.Severity, n.Read, dash(n.TaskID), n.NotificationID, n.Title)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printNext(notes.Next)
	return nil
}

func dash(s string) string { return cmp.Or(s, "-") }

// runTail prints a task's events and log lines in order as they are
// written, until the task has ended and everything written is shown.
func runTail(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "task" {
		return errors.New("usage: transit tail task --org O TASK_ID")
	}
	var org string
	var every time.Duration
	svc, fs, err := setup(ctx, "tail task", args[1:], func(fs *flag.FlagSet) {
		fs.StringVar(&org, "org", "", "the task's org (required)")
		fs.DurationVar(&every, "every", time.Second, "how often to look for more")
	})
	if err != nil {
		return err
	}
	if org == "" || fs.NArg() != 1 {
		return errors.New("usage: transit tail task --org O TASK_ID")
	}
	taskID := fs.Arg(0)
	var lastEvent, lastLog string
	for {
		// Read the state first: whatever was written before a final
		// state is then read below, so nothing is missed at the end.
		task, found, err := svc.Store.GetTask(ctx, org, taskID)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("tail task: no task %s in org %s", taskID, org)
		}
		events, logs, err := svc.Store.TaskHistorySince(ctx, taskID, lastEvent, lastLog)
		if err != nil {
			return err
		}
		for _, line := range tailLines(events, logs) {
			fmt.Println(line)
		}
		if len(events) > 0 {
			lastEvent = events[len(events)-1].SK
		}
		if len(logs) > 0 {
			lastLog = logs[len(logs)-1].SK
		}
		if task.EndedAt != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// tailLines are a task's events and log lines as `transit tail` prints
// them, merged by time.
func tailLines(events []store.TaskEvent, logs []store.LogEntry) []string {
	var out []string
	for _, l := range store.Interleave(events, logs) {
		if l.Event {
			out = append(out, fmt.Sprintf("%s  %-17s %s  (%s)", l.At, l.Kind, l.Text, l.Actor))
			continue
		}
		out = append(out, fmt.Sprintf("%s  %-17s %s", l.At, l.Kind, l.Text))
	}
	return out
}
