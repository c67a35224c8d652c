package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"transit/messages"
)

// These tests run the CLI as main does, up to the point where it would
// talk to AWS: every case fails on its arguments or settings first. The
// AWS settings point at a port nothing answers on, so a case that got
// further would fail on the connection instead, not reach a real account.

// cli runs transit with args and returns its exit status and stderr.
func cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	old := stderr
	stderr = &out
	t.Cleanup(func() { stderr = old })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := run(ctx, args)
	if ctx.Err() != nil {
		t.Fatalf("transit %s: still running after 20s", strings.Join(args, " "))
	}
	return code, out.String()
}

// offline points the AWS SDK at nothing and clears transit's settings.
func offline(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	for _, name := range []string{"TRANSIT_PREFIX", "TRANSIT_CONCURRENCY", "TRANSIT_COMMAND_TIMEOUT", "TRANSIT_DRAIN_TIMEOUT", "TRANSIT_VISIBILITY_TIMEOUT", "TRANSIT_LOG_LEVEL"} {
		t.Setenv(name, "")
	}
}

func TestNoSubcommandOrAnUnknownOnePrintsUsage(t *testing.T) {
	offline(t)
	for _, args := range [][]string{nil, {"frobnicate"}, {"--help-me"}} {
		code, out := cli(t, args...)
		if code != 2 {
			t.Errorf("transit %v: exit %d, want 2", args, code)
		}
		if !strings.HasPrefix(out, "usage: transit SUBCOMMAND") {
			t.Errorf("transit %v: stderr %q, want the usage", args, out)
		}
		for _, name := range []string{"serve", "send", "query", "schema"} {
			if !strings.Contains(out, "\n  "+name+" ") {
				t.Errorf("transit %v: usage lists no %s:\n%s", args, name, out)
			}
		}
	}
}

// The benchmark is cmd/transit-bench's: transit has neither its
// subcommands nor serve's metering flag.
func TestNoBenchmarkInTransit(t *testing.T) {
	offline(t)
	for _, name := range []string{"bench", "bench-baseline", "bench-serve"} {
		if _, ok := subcommands[name]; ok {
			t.Errorf("transit has a %s subcommand", name)
		}
		if code, out := cli(t, name); code != 2 || !strings.HasPrefix(out, "usage:") {
			t.Errorf("transit %s: exit %d, stderr %q; want 2 and the usage", name, code, out)
		}
	}
	code, out := cli(t, "serve", "--stats-out", "stats.json")
	if code != 1 || !strings.Contains(out, "transit serve: flag provided but not defined: -stats-out") {
		t.Errorf("transit serve --stats-out: exit %d, stderr:\n%s", code, out)
	}
}

func TestBadFlagNamesItself(t *testing.T) {
	offline(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--bogus"}, "transit serve: flag provided but not defined: -bogus"},
		{[]string{"provision", "--concurrency", "many"}, `transit provision: invalid value "many" for flag -concurrency`},
		{[]string{"serve", "--command-timeout", "20"}, `invalid value "20" for flag -command-timeout`},
		{[]string{"send", "sandbox.allocate", "--track", "t1"}, "transit send: flag provided but not defined: -track"},
		{[]string{"watch", "--count", "x"}, `transit watch: invalid value "x" for flag -count`},
		{[]string{"dlq", "list", "--max", "lots"}, `transit dlq: invalid value "lots" for flag -max`},
		{[]string{"query", "sandboxes", "--state", "available"}, "transit query: flag provided but not defined: -state"},
		{[]string{"query", "timers", "--shard", "one"}, `invalid value "one" for flag -shard`},
		{[]string{"schema", "--kind", "event"}, "transit schema: flag provided but not defined: -kind"},
		{[]string{"provider-stub", "--port", "8089"}, "transit provider-stub: flag provided but not defined: -port"},
	} {
		code, out := cli(t, c.args...)
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("transit %s: exit %d, want 1 and %q in stderr:\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
		// The flag package prints the flag set's usage after the error.
		if !strings.Contains(out, "Usage of transit ") {
			t.Errorf("transit %s: no flag usage in stderr:\n%s", strings.Join(c.args, " "), out)
		}
	}
}

func TestHelpIsNoError(t *testing.T) {
	offline(t)
	code, out := cli(t, "serve", "-h")
	if code != 1 || !strings.HasPrefix(out, "Usage of transit serve:") || strings.Contains(out, "transit serve: ") {
		t.Errorf("transit serve -h: exit %d, stderr:\n%s", code, out)
	}
	for _, flag := range []string{"-prefix", "-concurrency", "-command-timeout"} {
		if !strings.Contains(out, "  "+flag+" ") {
			t.Errorf("transit serve -h lists no %s", flag)
		}
	}
}

// send validates the command as transit will on receipt, before it
// connects to anything: a missing or malformed field is named.
func TestSendNamesTheFieldAtFault(t *testing.T) {
	offline(t)
	for _, c := range []struct {
		args  []string
		field string
		want  string
	}{
		{[]string{"send", "sandbox.allocate"}, "track_id", "transit send: not sent: sandbox.allocate: invalid track_id: required"},
		{[]string{"send", "sandbox.mark-deletion", "--track_id", "t1"}, "sandbox_id", "sandbox.mark-deletion: invalid sandbox_id"},
		{[]string{"send", "sandbox.allocate", "--track_id", "has space"}, "track_id", "sandbox.allocate: invalid track_id"},
		{[]string{"send", "sandbox.allocate", "--json", `{"track_id":""}`}, "track_id", "invalid track_id: required"},
		{[]string{"send", "sandbox.allocate", "--track_id", "t1", "--id", "two\nlines"}, "id", "transit send: not sent: invalid id: contains a control character"},
	} {
		code, out := cli(t, c.args...)
		if code != 1 || !strings.Contains(out, c.want) || !strings.Contains(out, "invalid "+c.field+": ") {
			t.Errorf("transit %s: exit %d, want 1 and %q in stderr:\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
		if strings.Contains(out, "127.0.0.1:9") || strings.Contains(out, "sent sandbox") {
			t.Errorf("transit %s: tried to send before validating:\n%s", strings.Join(c.args, " "), out)
		}
	}
}

func TestCheckCommandReturnsTheInvalidField(t *testing.T) {
	payload, _ := messages.NewCommandPayload(messages.SandboxAllocate)
	err := checkCommand("c1", messages.SandboxAllocate, payload)
	var ie *messages.InvalidError
	if !errors.As(err, &ie) || ie.Field != "track_id" || ie.Command != messages.SandboxAllocate {
		t.Fatalf("checkCommand without track_id: %v, want an InvalidError on sandbox.allocate's track_id", err)
	}
	payload.(*messages.SandboxAllocatePayload).TrackID = "t1"
	if err := checkCommand("c1", messages.SandboxAllocate, payload); err != nil {
		t.Fatalf("checkCommand with track_id: %v", err)
	}
	// Validation works on a copy: what is sent is what the flags said.
	if p := payload.(*messages.SandboxAllocatePayload); p.IdempotencyKey != "" {
		t.Errorf("checkCommand set idempotency_key to %q on the payload it was given", p.IdempotencyKey)
	}
}

func TestSendUsage(t *testing.T) {
	offline(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send"}, "transit send: usage: transit send TYPE [flags]; types: ["},
		{[]string{"send", "--wait"}, "transit send: usage: transit send TYPE"},
		{[]string{"send", "sandbox.allocated"}, `transit send: unknown command type "sandbox.allocated"; types: [`},
		{[]string{"send", "sandbox.allocate", "--json", `{"track_id":`}, "transit send: --json: "},
	} {
		code, out := cli(t, c.args...)
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("transit %s: exit %d, want 1 and %q in stderr:\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
}

// send has a flag per string or number field of the command's payload,
// under its JSON name.
func TestSendHasAFlagPerPayloadField(t *testing.T) {
	payload, _ := messages.NewCommandPayload(messages.SandboxAllocate)
	fs := newFlagSet("send")
	payloadFlags(fs, payload)
	if err := fs.Parse([]string{"--track_id", "t1", "--idempotency_key", "k1"}); err != nil {
		t.Fatal(err)
	}
	p := payload.(*messages.SandboxAllocatePayload)
	if p.TrackID != "t1" || p.IdempotencyKey != "k1" {
		t.Errorf("payload %+v, want track_id t1 and idempotency_key k1", *p)
	}
}

func TestQueryWithABadSubcommandPrintsItsUsage(t *testing.T) {
	offline(t)
	for _, args := range [][]string{{"query"}, {"query", "sandbox"}, {"query", "--status", "available"}} {
		code, out := cli(t, args...)
		if code != 1 || !strings.HasPrefix(out, "transit query: usage: transit query sandboxes ") {
			t.Errorf("transit %s: exit %d, stderr %q; want 1 and query's usage", strings.Join(args, " "), code, out)
		}
		for _, sub := range []string{"layers", "timers", "shards", "tasks", "schedule SCHEDULE_ID", "resources --account A"} {
			if !strings.Contains(out, sub) {
				t.Errorf("transit %s: query's usage lacks %q", strings.Join(args, " "), sub)
			}
		}
	}
}

func TestDLQWithABadActionPrintsItsUsage(t *testing.T) {
	offline(t)
	for _, args := range [][]string{{"dlq"}, {"dlq", "purge"}} {
		code, out := cli(t, args...)
		if code != 1 || !strings.Contains(out, "transit dlq: usage: transit dlq list|redrive") {
			t.Errorf("transit %s: exit %d, stderr %q", strings.Join(args, " "), code, out)
		}
	}
}

// A bad setting stops a subcommand before it does anything, naming the
// setting: its variable, and its flag where the value is out of range.
func TestBadSettingIsNamed(t *testing.T) {
	for _, c := range []struct {
		env, value string
		args       []string
		want       []string
	}{
		{"TRANSIT_COMMAND_TIMEOUT", "-1s", []string{"provision"}, []string{"TRANSIT_COMMAND_TIMEOUT (--command-timeout): -1s, want more than 0"}},
		{"TRANSIT_DRAIN_TIMEOUT", "soon", []string{"serve"}, []string{`TRANSIT_DRAIN_TIMEOUT: "soon" is not a duration`}},
		{"TRANSIT_CONCURRENCY", "0", []string{"send", "sandbox.allocate", "--track_id", "t1"}, []string{"TRANSIT_CONCURRENCY (--concurrency)"}},
		{"TRANSIT_VISIBILITY_TIMEOUT", "1m30.5s", []string{"query", "shards"}, []string{"TRANSIT_VISIBILITY_TIMEOUT (--visibility-timeout)", "whole seconds"}},
		{"TRANSIT_LOG_LEVEL", "loud", []string{"watch"}, []string{"TRANSIT_LOG_LEVEL"}},
		// A flag wins over the variable, and is checked the same way.
		{"", "", []string{"provision", "--command-timeout", "0s"}, []string{"TRANSIT_COMMAND_TIMEOUT (--command-timeout): 0s"}},
	} {
		t.Run(c.env+" "+strings.Join(c.args, " "), func(t *testing.T) {
			offline(t)
			if c.env != "" {
				t.Setenv(c.env, c.value)
			}
			code, out := cli(t, c.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("stderr lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "127.0.0.1:9") {
				t.Errorf("got as far as AWS:\n%s", out)
			}
		})
	}
}

func TestProbeExitsByTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "not ready: router not running", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	code, _ := cli(t, "probe", "--addr", addr)
	assert.Equal(t, 0, code, "alive")
	code, out := cli(t, "probe", "--ready", "--addr", addr)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "router not running", "the reason is printed")
}

// Flags may follow the positional arguments (`transit trace ID --json`);
// "--" still ends them.
func TestParseInterleaved(t *testing.T) {
	cases := []struct {
		args       []string
		positional []string
		json       bool
		max        int
	}{
		{[]string{"corr-1", "--json"}, []string{"corr-1"}, true, 10},
		{[]string{"--max", "5", "corr-1"}, []string{"corr-1"}, false, 5},
		{[]string{"corr-1", "--max", "7", "corr-2", "--json"}, []string{"corr-1", "corr-2"}, true, 7},
		{[]string{"--json", "--", "--max"}, []string{"--max"}, true, 10},
		{nil, nil, false, 10},
	}
	for _, c := range cases {
		fs := newFlagSet("trace")
		asJSON := fs.Bool("json", false, "")
		limit := fs.Int("max", 10, "")
		if err := parseInterleaved(fs, c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := fs.Args(); !slices.Equal(got, c.positional) || *asJSON != c.json || *limit != c.max {
			t.Errorf("%v: positional %q json %v max %d, want %q %v %d", c.args, got, *asJSON, *limit, c.positional, c.json, c.max)
		}
	}
}
