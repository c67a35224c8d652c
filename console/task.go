package console

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"transit/machine"
	"transit/store"
)

// boardColumn bounds the tasks one column shows.
const boardColumn = 50

type boardData struct {
	Org, Project string
	Columns      []taskColumn
	Agents       []agentGroup
	At           time.Time
}

type taskColumn struct {
	State string
	Tasks []store.Task
}

type agentGroup struct {
	Status string
	Agents []store.Agent
}

// board is the tasks of org (every org's for "") by state, of one
// project when project is set, and the org's agents by status.
func (c *Console) board(ctx context.Context, org, project string) (boardData, error) {
	return shared(c, "board\x00"+org+"\x00"+project, func() (boardData, error) { return c.readBoard(ctx, org, project) })
}

func (c *Console) readBoard(ctx context.Context, org, project string) (boardData, error) {
	d := boardData{Org: org, Project: project, At: time.Now()}
	byState := map[string][]store.Task{}
	if project != "" {
		page, err := c.svc.Store.ListTasks(ctx, org, store.ByProject, project, int32(boardColumn*len(machine.Task.States)), "")
		if err != nil {
			return boardData{}, err
		}
		for _, t := range page.Items {
			byState[t.State] = append(byState[t.State], t)
		}
	}
	for _, state := range machine.Task.States {
		col := taskColumn{State: state, Tasks: byState[state]}
		if project == "" {
			page, err := c.svc.Store.ListTasks(ctx, org, store.ByState, state, boardColumn, "")
			if err != nil {
				return boardData{}, err
			}
			col.Tasks = page.Items
		}
		d.Columns = append(d.Columns, col)
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

// tasks shows the board: a column per task state, and the agents.
func (c *Console) tasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d, err := c.board(r.Context(), q.Get("org"), q.Get("project"))
	if err != nil {
		c.fail(w, r, "the tasks", err)
		return
	}
	c.render(w, r, http.StatusOK, "tasks", map[string]any{"Board": d})
}

// tasksLive streams the board as it changes.
func (c *Console) tasksLive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.stream(w, r, c.opts.Live, func(ctx context.Context, send func(event string, data []byte)) error {
		d, err := c.board(ctx, q.Get("org"), q.Get("project"))
		if err != nil {
			return err
		}
		frag, err := c.fragment("tasks", "board", map[string]any{"Board": d})
		if err == nil {
			send("board", frag)
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
// after the page was rendered, as `transit tail task` prints them.
func (c *Console) taskLive(w http.ResponseWriter, r *http.Request) {
	org, id := r.PathValue("org"), r.PathValue("task")
	lastEvent, lastLog := r.URL.Query().Get("events_after"), r.URL.Query().Get("logs_after")
	c.stream(w, r, min(c.opts.Live, time.Second), func(ctx context.Context, send func(event string, data []byte)) error {
		// The state first: what was written before it is read below.
		t, _, err := c.svc.Store.GetTask(ctx, org, id)
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
		send("state", frag)
		if lines := store.Interleave(events, logs); len(lines) > 0 {
			if frag, err = c.fragment("task", "lines", lines); err != nil {
				return err
			}
			send("lines", frag)
		}
		return nil
	})
}
