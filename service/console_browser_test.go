package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/messages"
)

// chromiumPath is Debian's Chromium, which `make test` installs where it
// is missing.
const chromiumPath = "/usr/bin/chromium"

// browser starts a headless Chromium for the test, with the flags that
// keep it off the network but for the pages it is sent to.
func browser(t *testing.T) context.Context {
	t.Helper()
	require.FileExists(t, chromiumPath, "the browser tests need Chromium: make test installs it (apt-get install chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The browser lives as long as this first run's context: no timeout
	// on it, only on what runs after.
	require.NoError(t, chromedp.Do(ctx))
	ctx, cancelRun := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelRun)
	return ctx
}

// screenshots is where the pages' pictures go: docs/console when
// TRANSIT_SCREENSHOTS is set (`make screenshots`, for the README), else
// the test's own directory.
func screenshots(t *testing.T) string {
	if os.Getenv("TRANSIT_SCREENSHOTS") != "" {
		dir, err := filepath.Abs("../docs/console")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

// text is the rendered text of the first element css selects, "" when
// none does, read in one step: a live view may swap the element out
// between a lookup and a read of it.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	sel, err := json.Marshal(css)
	require.NoError(t, err)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+string(sel)+`)?.innerText ?? ""`))
	require.NoError(t, err)
	return got
}

// shoot takes a full-page PNG of what the browser shows into dir/name.
func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.Greater(t, len(png), 1000, "a picture of %s", name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

// In a browser, against serve on moto: the overview updates itself as a
// known mix of commands lands (two dead letters appear without a reload);
// a poison message shows under dead letters with its reason; a
// dead-lettered command is redriven from the page after a confirmation
// and handled; the trace of an allocation shows its expiry timer and the
// expiry it sent, nested as they caused each other.
func TestConsole_in_a_browser(t *testing.T) {
	s, base := servedConsole(t, "", func(c *config.Config) { c.SandboxExpiry = config.ExpiryTimer; c.SweepInterval = 0 })
	ctx := browser(t)
	dir := screenshots(t)

	sync := uuid.NewString()
	s.send(sync, messages.SandboxSync, messages.SandboxSyncPayload{Inventory: []messages.InventoryItem{
		{ExternalID: "lab-short", Name: "short lab", LabDurationHours: 3.0 / 3600},
	}})
	s.eventFor(sync, messages.SandboxSynced)
	alloc := uuid.NewString()
	s.send(alloc, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-short"})
	allocated := payloadOf[messages.SandboxAllocatedPayload](t, s.eventFor(alloc, messages.SandboxAllocated))

	deadLetters := `tr[data-domain="sandbox"] td[data-field="dead_letters"]`
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(deadLetters))))
	assert.Equal(t, "0", text(t, ctx, deadLetters))

	s.sendRaw(`{"not": "a command"`, nil)
	parked := uuid.NewString()
	s.deadLetter(parked, messages.SandboxAllocate, messages.SandboxAllocatePayload{TrackID: "track-2"}, "table missing")
	require.Eventually(t, func() bool {
		return text(t, ctx, deadLetters) == "2 ⚠"
	}, 45*time.Second, 200*time.Millisecond, "the overview shows both dead letters without a reload")
	shoot(t, ctx, dir, "overview.png")

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/dead-letters")))
	reasons, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#dlq-sandbox tr.letter .reason')].map(e => e.textContent)`))
	require.NoError(t, err)
	parkedID, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#dlq-sandbox tr.letter')].find(r => r.querySelector('.reason').textContent === 'table missing').dataset.messageId`))
	require.NoError(t, err)
	require.Len(t, reasons, 2)
	assert.Contains(t, reasons, "table missing")
	assert.Contains(t, reasons[0]+reasons[1], "invalid body: not a JSON object", "the poison message's reason")
	shoot(t, ctx, dir, "dead-letters.png")

	confirmButton := chromedp.CSS(`input[name="confirm"] ~ button`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr[data-message-id="`+parkedID+`"] button`)),
		chromedp.WaitVisible(confirmButton),
	))
	confirm := text(t, ctx, `main p`)
	assert.Contains(t, confirm, parkedID, "the confirmation names the message")
	shoot(t, ctx, dir, "redrive.png")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(confirmButton), chromedp.WaitVisible(chromedp.CSS(`.done`))))
	done := text(t, ctx, `.done`)
	assert.Equal(t, "Redrove 1 message(s) to their command queue.", done)
	s.eventFor(parked, messages.SandboxAllocationRejected)

	// The poison message redriven too: handled again, it is dead-lettered
	// again, with the same reason, under a new message ID.
	poisonID, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#dlq-sandbox tr.letter').dataset.messageId`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr[data-message-id="`+poisonID+`"] button`)), chromedp.WaitVisible(confirmButton),
		chromedp.Click(confirmButton), chromedp.WaitVisible(chromedp.CSS(`.done`))))
	require.Eventually(t, func() bool {
		letters := s.deadLetters(1)
		return letters[0].MessageID != poisonID && strings.Contains(letters[0].Reason, "invalid body: not a JSON object")
	}, 30*time.Second, 500*time.Millisecond, "dead-lettered again after the redrive")

	expire := messages.DerivedID(alloc, messages.SandboxExpire, allocated.SandboxID)
	s.eventFor(expire, messages.SandboxExpired)
	// The expiry was sent by the allocation's timer: it is caused by the
	// allocation, beside the timer whose firing sent it.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/trace?correlation="+alloc), chromedp.WaitVisible(chromedp.CSS(`#trace`))))
	for _, chain := range []string{
		`#trace > li[data-action="sandbox.allocate"] > ul > li[data-action="timer.create"] > ul > li[data-action="timer.due"]`,
		`#trace > li[data-action="sandbox.allocate"] > ul > li[data-action="sandbox.expire"]`,
	} {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+chain+`').length`))
		require.NoError(t, err)
		assert.Equal(t, 1, n, chain)
	}
	shoot(t, ctx, dir, "trace.png")

	for page, name := range map[string]string{"/sandboxes": "sandboxes.png", "/timers": "timers.png"} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS(`main h1`))))
		shoot(t, ctx, dir, name)
	}
	// The sandbox's history, reached by its link.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/sandboxes"),
		chromedp.Click(chromedp.CSS(`main table a[href^="/history"]`)), chromedp.WaitVisible(chromedp.CSS(`input#entity`))))
	entity := text(t, ctx, `main h2`)
	assert.Equal(t, "SANDBOX#"+allocated.SandboxID, entity)
	actions := text(t, ctx, `main table`)
	assert.Contains(t, actions, "sandbox.allocate")
	assert.Contains(t, actions, "sandbox.expire")
	shoot(t, ctx, dir, "history.png")
}

// inColumn is the state whose board column holds task id's card, "" when
// none does.
func inColumn(t *testing.T, ctx context.Context, id string) string {
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('.column li[data-task="`+id+`"]')?.closest('.column')?.dataset.state) ?? ""`))
	require.NoError(t, err)
	return state
}

// In a browser: a task moves across the board as its agent works, the
// page never reloaded; a task's page shows its events and log lines as
// they are written, and its state as it changes.
func TestConsole_task_board_in_a_browser(t *testing.T) {
	s, base := servedConsole(t, "")
	ctx := browser(t)
	dir := screenshots(t)
	s.org()
	s.queueTask("t-board", "move across the board")

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/tasks?org=acme"), chromedp.WaitVisible(chromedp.CSS(`li[data-task="t-board"]`))))
	assert.Equal(t, "QUEUED", inColumn(t, ctx, "t-board"))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.stayed = true`))
	require.NoError(t, err)

	wait := s.startAgent("agent-1", "echo working; sleep 3; echo done")
	seen := map[string]bool{}
	require.Eventually(t, func() bool {
		seen[inColumn(t, ctx, "t-board")] = true
		return seen["COMPLETED"]
	}, time.Minute, 100*time.Millisecond, "the card reaches COMPLETED")
	assert.True(t, seen["RUNNING"], "and was seen RUNNING on the way: %v", seen)
	stayed, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.stayed === true`))
	require.NoError(t, err)
	assert.True(t, stayed, "the board moved it without a reload")
	require.NoError(t, wait())
	shoot(t, ctx, dir, "tasks.png")

	s.queueTask("t-page", "show me")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/tasks/acme/t-page"), chromedp.WaitVisible(chromedp.CSS(`#state`))))
	assert.Equal(t, "QUEUED", text(t, ctx, `#state strong`))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.stayed = true`))
	require.NoError(t, err)
	wait = s.startAgent("agent-2", "echo first line; sleep 1; echo last line")
	require.Eventually(t, func() bool {
		return text(t, ctx, `#state strong`) == "COMPLETED"
	}, time.Minute, 200*time.Millisecond, "the page shows the task completed")
	require.NoError(t, wait())
	var lines string
	require.Eventually(t, func() bool {
		lines = text(t, ctx, `#lines`)
		return strings.Contains(lines, "last line")
	}, 10*time.Second, 200*time.Millisecond, "the log lines arrive")
	assert.Less(t, strings.Index(lines, "first line"), strings.Index(lines, "last line"), "in order")
	assert.Equal(t, 1, strings.Count(lines, "first line"), "each once")
	stayed, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.stayed === true`))
	require.NoError(t, err)
	assert.True(t, stayed, "the page was not reloaded")
	shoot(t, ctx, dir, "task.png")

	// A browser that reconnects sends the last event's id back: the
	// stream goes on from there, and repeats no line.
	events, logs, err := s.svc.Store.TaskHistorySince(context.Background(), "t-page", "", "")
	require.NoError(t, err)
	read := func(lastEventID string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/live/tasks/acme/t-page", nil)
		require.NoError(t, err)
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body) // until the timeout: the stream stays open
		return string(body)
	}
	assert.Contains(t, read(""), "last line", "from the start without an id")
	resumed := read(url.Values{"events_after": {events[len(events)-1].SK}, "logs_after": {logs[len(logs)-1].SK}}.Encode())
	assert.Contains(t, resumed, "event: state")
	assert.NotContains(t, resumed, "event: lines", "nothing after the last id")
}

// In a browser: the schedules page shows a schedule's next windows in its
// own zone and, beside them, in the viewer's; a schedule's page shows
// what its last window did to each resource.
func TestConsole_schedules_in_a_browser(t *testing.T) {
	s, base := servedConsole(t, "")
	ctx := browser(t)
	dir := screenshots(t)
	arns := s.cloud().instances(1)
	s.account("Sandbox account")
	sch := s.schedule("sch-dev", arns...)
	stopped := s.window("sch-dev", messages.EdgeStop, sch.NextStopAt, 1)
	require.Len(t, stopped.Results, 1)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="sch-dev"]`))))
	row := text(t, ctx, `tr[data-schedule="sch-dev"]`)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	next, err := time.Parse(time.RFC3339Nano, stopped.NextAt)
	require.NoError(t, err)
	assert.Contains(t, row, next.In(berlin).Format("2006-01-02 15:04 MST"), "the next stop in the schedule's zone")
	assert.Contains(t, row, "(yours: ", "and in the viewer's")
	shoot(t, ctx, dir, "schedules.png")

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/schedules/sch-dev"), chromedp.WaitVisible(chromedp.CSS(`main table`))))
	resources := text(t, ctx, `main table tbody`)
	assert.Contains(t, resources, arns[0])
	assert.Contains(t, resources, messages.ExecSuccess, "the last window's result")
	shoot(t, ctx, dir, "schedule.png")
}
