package provider_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/provider"
)

func TestDeleteSandbox_deletes_at_provider(t *testing.T) {
	stub := provider.NewStub("ext-1", "ext-2")
	srv := httptest.NewServer(stub)
	defer srv.Close()

	err := provider.New(srv.URL, time.Second).DeleteSandbox(context.Background(), "ext-1")
	require.NoError(t, err)
	assert.False(t, stub.Has("ext-1"))
	assert.Equal(t, 1, stub.Deletes("ext-1"))
	assert.True(t, stub.Has("ext-2"), "only the named sandbox goes")
	assert.Equal(t, 0, stub.Deletes("ext-2"))
}

func TestDeleteSandbox_trims_trailing_slash_of_base(t *testing.T) {
	stub := provider.NewStub("ext-1")
	srv := httptest.NewServer(stub)
	defer srv.Close()

	// A "//sandboxes" path would miss the provider's route.
	require.NoError(t, provider.New(srv.URL+"/", time.Second).DeleteSandbox(context.Background(), "ext-1"))
	assert.False(t, stub.Has("ext-1"))
}

func TestDeleteSandbox_unknown_id_counts_as_deleted(t *testing.T) {
	stub := provider.NewStub("ext-1")
	srv := httptest.NewServer(stub)
	defer srv.Close()
	client := provider.New(srv.URL, time.Second)

	// A repeated cleanup must succeed once the provider has forgotten it.
	require.NoError(t, client.DeleteSandbox(context.Background(), "ext-missing"))
	assert.Equal(t, 1, stub.Deletes("ext-missing"), "the request reached the provider")

	require.NoError(t, client.DeleteSandbox(context.Background(), "ext-1"))
	require.NoError(t, client.DeleteSandbox(context.Background(), "ext-1"))
	assert.Equal(t, 2, stub.Deletes("ext-1"))
	assert.False(t, stub.Has("ext-1"))
}

func TestDeleteSandbox_fails_on_provider_outage(t *testing.T) {
	stub := provider.NewStub("ext-1", "ext-2")
	// Set before the server starts so the handler goroutines see it.
	stub.FailWhen(func(id string) bool { return id == "ext-1" })
	srv := httptest.NewServer(stub)
	defer srv.Close()
	client := provider.New(srv.URL, time.Second)

	err := client.DeleteSandbox(context.Background(), "ext-1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "503")
	assert.Contains(t, err.Error(), "ext-1")
	assert.True(t, stub.Has("ext-1"), "a failed deletion leaves the sandbox")
	assert.Equal(t, 1, stub.Deletes("ext-1"))

	require.NoError(t, client.DeleteSandbox(context.Background(), "ext-2"), "the outage is per sandbox")
}

func TestDeleteSandbox_fails_on_other_error_statuses(t *testing.T) {
	tests := []struct {
		Name   string
		Status int
	}{
		{Name: "bad_request", Status: http.StatusBadRequest},
		{Name: "conflict", Status: http.StatusConflict},
		{Name: "internal_error", Status: http.StatusInternalServerError},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "refused by test", tc.Status)
			}))
			defer srv.Close()

			err := provider.New(srv.URL, time.Second).DeleteSandbox(context.Background(), "ext-1")
			require.Error(t, err)
			assert.Contains(t, err.Error(), http.StatusText(tc.Status))
			assert.Contains(t, err.Error(), "refused by test", "the provider's reason helps the operator")
		})
	}
}

func TestDeleteSandbox_times_out_on_silent_provider(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Sleep well past the client's limit, but let Close end it early.
		select {
		case <-time.After(10 * timeout):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()

	start := time.Now()
	err := provider.New(srv.URL, timeout).DeleteSandbox(context.Background(), "ext-1")
	elapsed := time.Since(start)

	require.Error(t, err)
	var nerr net.Error
	require.True(t, errors.As(err, &nerr), "want a net.Error, got %T: %v", err, err)
	assert.True(t, nerr.Timeout(), "error: %v", err)
	assert.Less(t, elapsed, 5*timeout, "the client gave up instead of waiting for the handler")
}

func TestDeleteSandbox_honours_context_deadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()

	// The caller's deadline (the command timeout) applies even when the
	// client's own timeout is longer.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := provider.New(srv.URL, time.Minute).DeleteSandbox(ctx, "ext-1")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestDeleteSandbox_escapes_external_id(t *testing.T) {
	tests := []struct {
		Name        string
		ExternalID  string
		WantRawPath string
	}{
		{Name: "slash_and_space", ExternalID: "a/b c", WantRawPath: "/sandboxes/a%2Fb%20c"},
		{Name: "query_and_fragment", ExternalID: "x?y#z", WantRawPath: "/sandboxes/x%3Fy%23z"},
		{Name: "percent", ExternalID: "100%", WantRawPath: "/sandboxes/100%25"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			// "a" is a decoy: an unescaped "a/b c" could be routed as "a".
			stub := provider.NewStub(tc.ExternalID, "a", "x", "100")
			var mu sync.Mutex
			var rawPath string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				rawPath = r.URL.EscapedPath()
				mu.Unlock()
				stub.ServeHTTP(w, r)
			}))
			defer srv.Close()

			require.NoError(t, provider.New(srv.URL, time.Second).DeleteSandbox(context.Background(), tc.ExternalID))
			mu.Lock()
			assert.Equal(t, tc.WantRawPath, rawPath)
			mu.Unlock()
			assert.False(t, stub.Has(tc.ExternalID), "the stub decoded the escaped ID and deleted it")
			assert.Equal(t, 1, stub.Deletes(tc.ExternalID))
			for _, other := range []string{"a", "x", "100"} {
				assert.True(t, stub.Has(other), "%q must survive", other)
			}
		})
	}
}

func TestListSandboxes_follows_every_page(t *testing.T) {
	stub := provider.NewStub()
	var want []provider.Sandbox
	for i := range 7 {
		sb := provider.Sandbox{ExternalID: fmt.Sprintf("ext-%d", i), Name: fmt.Sprintf("lab %d", i), LabDurationHours: 0.5 + float64(i)}
		want = append(want, sb)
	}
	stub.Put(want...)
	stub.SetPageSize(3)
	srv := httptest.NewServer(stub)
	defer srv.Close()

	got, err := provider.New(srv.URL, time.Second).ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, want, got, "three pages, in order, every field")
	assert.Equal(t, 1, stub.Lists())
}

func TestListSandboxes_of_an_empty_provider_is_an_empty_list(t *testing.T) {
	srv := httptest.NewServer(provider.NewStub())
	defer srv.Close()

	got, err := provider.New(srv.URL, time.Second).ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.NotNil(t, got, "none, not unknown: a sync stales what it does not list")
	assert.Empty(t, got)
}

func TestListSandboxes_ignores_members_it_does_not_know(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"sandboxes":[{"external_id":"e","name":"n","lab_duration_hours":2,"region":"eu"}],"total":1}`)
	}))
	defer srv.Close()

	got, err := provider.New(srv.URL, time.Second).ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []provider.Sandbox{{ExternalID: "e", Name: "n", LabDurationHours: 2}}, got)
}

func TestListSandboxes_fails_on_what_is_no_list(t *testing.T) {
	tests := []struct {
		Name string
		Body string
		Code int
		Want string
	}{
		{Name: "error_status", Code: http.StatusServiceUnavailable, Body: "down for maintenance", Want: "down for maintenance"},
		{Name: "not_json", Code: http.StatusOK, Body: "<html>", Want: "not a page of sandboxes"},
		{Name: "wrong_shape", Code: http.StatusOK, Body: `{"sandboxes":{"e":1}}`, Want: "not a page of sandboxes"},
		// The second page, asked for by its token, names itself as next.
		{Name: "token_that_never_moves", Code: http.StatusOK, Body: `{"sandboxes":[],"next_page_token":"same"}`, Want: "with itself"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.Code)
				fmt.Fprint(w, tc.Body)
			}))
			defer srv.Close()

			_, err := provider.New(srv.URL, time.Second).ListSandboxes(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.Want)
		})
	}
}

func TestListSandboxes_sends_the_page_token_escaped(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Query().Get("page_token") == "" {
			fmt.Fprint(w, `{"sandboxes":[{"external_id":"a","name":"a","lab_duration_hours":1}],"next_page_token":"a&b=c"}`)
			return
		}
		fmt.Fprint(w, `{"sandboxes":[{"external_id":"b","name":"b","lab_duration_hours":1}]}`)
	}))
	defer srv.Close()

	got, err := provider.New(srv.URL, time.Second).ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Len(t, got, 2)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"", "page_token=a%26b%3Dc"}, queries)
}
