package console

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"transit/machine"
	"transit/store"
)

// boardColumn bounds the tasks one column shows, and boardPages the
// pages read to fill it: a listing filtered on an org or a project may
// have to read past other orgs' or finished tasks.
const (
	boardColumn = 50
	boardPages  = 10
)

type boardData struct {
	Org, Project string
	Columns      []taskColumn
	Agents       []agentGroup
	At           time.Time
}

type taskColumn struct {
	State string
	Tasks []store.Task
	// More is true when the column has tasks it does not show.
	More bool
}

type agentGroup struct {
	Status string
	Agents []store.Agent
}

// board is the tasks of org (every org's for "") by state, of one
// project when project is set, and the org's agents by status.
func (c *Console) board(ctx context.Context, org, project string) (boardData, error) {
	return shared(ctx, c, "board\x00"+org+"\x00"+project, func(ctx context.Context) (boardData, error) {
		return c.readBoard(ctx, org, project)
	})
}

func (c *Console) readBoard(ctx context.Context, org, project string) (boardData, error) {
	d := boardData{Org: org, Project: project, At: time.Now()}
	byState := map[string]*taskColumn{}
	for _, state := range machine.Task.States {
		byState[state] = &taskColumn{State: state}
	}
	if project != "" {
		// A project's tasks, newest first, into their columns.
		err := pages(func(cursor string) (store.Page[store.Task], error) {
			return c.svc.Store.ListTasks(ctx, org, store.ByProject, project, boardColumn, cursor)
		}, func(t store.Task) bool {
			col := byState[t.State]
			if len(col.Tasks) == boardColumn {
				col.More = true
				return true
			}
			col.Tasks = append(col.Tasks, t)
			return true
		}, func() { markMore(byState) })
		if err != nil {
			return boardData{}, err
		}
	} else {
		for _, state := range machine.Task.States {
			col := byState[state]
			err := pages(func(cursor string) (store.Page[store.Task], error) {
				return c.svc.Store.ListTasks(ctx, org, store.ByState, state, boardColumn, cursor)
			}, func(t store.Task) bool {
				col.Tasks = append(col.Tasks, t)
				return len(col.Tasks) < boardColumn
			}, func() { col.More = true })
			if err != nil {
				return boardData{}, err
			}
		}
	}
	for _, state := range machine.Task.States {
		d.Columns = append(d.Columns, *byState[state])
	}
	for _, status := range machine.Agent.States {
		page, err := c.svc.Store.ListAgents(ctx, org, status, boardColumn, "")
		if err != nil {
			return boardData{}, err
		}
		d.Agents = append(d.Agents, agentGroup{Status: status, Agents: page.Items})
	}
	return d, nil
}

// pages reads pages of list, giving each item to take while it asks for
// more, for at most boardPages pages; cut is called when items were left
// unread.
func pages[T any](list func(cursor string) (store.Page[T], error), take func(T) bool, cut func()) error {
	cursor := ""
	for range boardPages {
		page, err := list(cursor)
		if err != nil {
			return err
		}
		for i, item := range page.Items {
			if !take(item) {
				if i < len(page.Items)-1 || page.Next != "" {
					cut()
				}
				return nil
			}
		}
		if cursor = page.Next; cursor == "" {
			return nil
		}
	}
	cut()
	return nil
}

// markMore marks every column cut short when a project's listing was.
func markMore(cols map[string]*taskColumn) {
	for _, col := range cols {
		col.More = true
	}
}

// tasks shows the board: a column per task state, and the agents.
func (c *Console) tasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d, err := c.board(r.Context(), q.Get("org"), q.Get("project"))
	if err != nil {
		c.fail(w, r, "the tasks", err)
		return
	}
	live := url.Values{"org": {d.Org}, "project": {d.Project}}
	c.render(w, r, http.StatusOK, "tasks", map[string]any{"Board": d, "LiveURL": "/live/tasks?" + live.Encode()})
}

// tasksLive streams the board as it changes.
func (c *Console) tasksLive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.stream(w, r, c.opts.Live, func(ctx context.Context, send func(event, id string, data []byte)) error {
		d, err := c.board(ctx, q.Get("org"), q.Get("project"))
		if err != nil {
			return err
		}
		frag, err := c.fragment("tasks", "board", map[string]any{"Board": d})
		if err == nil {
			send("board", "", frag)
		}
		return err
	})
}

// task shows one task, its events and log lines in order.
func (c *Console) task(w http.ResponseWriter, r *http.Request) {
	org, id := r.PathValue("org"), r.PathValue("task")
	t, found, err := c.svc.Store.GetTask(r.Context(), org, id)
	if err == nil && !found {
		http.Error(w, "no task "+id+" in org "+org, http.StatusNotFound)
		return
	}
	var events []store.TaskEvent
	var logs []store.LogEntry
	if err == nil {
		events, logs, err = c.svc.Store.TaskHistorySince(r.Context(), id, "", "")
	}
	if err != nil {
		c.fail(w, r, "task "+id, err)
		return
	}
	// The live view goes on after what is shown.
	live := url.Values{}
	if len(events) > 0 {
		live.Set("events_after", events[len(events)-1].SK)
	}
	if len(logs) > 0 {
		live.Set("logs_after", logs[len(logs)-1].SK)
	}
	c.render(w, r, http.StatusOK, "task", map[string]any{"Task": t, "Lines": store.Interleave(events, logs),
		"LiveURL": "/live/tasks/" + url.PathEscape(org) + "/" + url.PathEscape(id) + "?" + live.Encode()})
}

// taskLive streams a task's state and every event and log line written
// after the page was rendered, as `transit tail task` prints them. Each
// batch of lines carries the position after it as its event id, so a
// browser that reconnects goes on from there instead of repeating them.
// Once the task ended and its last lines are sent, nothing more is read.
func (c *Console) taskLive(w http.ResponseWriter, r *http.Request) {
	org, id := r.PathValue("org"), r.PathValue("task")
	from := r.URL.Query()
	if last, err := url.ParseQuery(r.Header.Get("Last-Event-ID")); err == nil && r.Header.Get("Last-Event-ID") != "" {
		from = last
	}
	lastEvent, lastLog := from.Get("events_after"), from.Get("logs_after")
	c.stream(w, r, min(c.opts.Live, time.Second), func(ctx context.Context, send func(event, id string, data []byte)) error {
		// The state first: what was written before it is read below.
		t, found, err := c.svc.Store.GetTask(ctx, org, id)
		if err != nil {
			return err
		}
		events, logs, err := c.svc.Store.TaskHistorySince(ctx, id, lastEvent, lastLog)
		if err != nil {
			return err
		}
		if len(events) > 0 {
			lastEvent = events[len(events)-1].SK
		}
		if len(logs) > 0 {
			lastLog = logs[len(logs)-1].SK
		}
		frag, err := c.fragment("task", "state", t)
		if err != nil {
			return err
		}
		send("state", "", frag)
		if lines := store.Interleave(events, logs); len(lines) > 0 {
			if frag, err = c.fragment("task", "lines", lines); err != nil {
				return err
			}
			send("lines", url.Values{"events_after": {lastEvent}, "logs_after": {lastLog}}.Encode(), frag)
		}
		if !found || t.EndedAt != "" {
			return errEnded
		}
		return nil
	})
}
