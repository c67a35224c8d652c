// Package provider talks to the external sandbox provider, the service
// that hosts the lab sandboxes (docs/sandbox.md), over HTTP.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client lists and deletes sandboxes at the provider:
// GET {base}/sandboxes and DELETE {base}/sandboxes/{external_id}.
type Client struct {
	base string
	http *http.Client
}

// New returns a client for the provider at baseURL, each call bounded by timeout.
func New(baseURL string, timeout time.Duration) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Timeout: timeout}}
}

// DeleteSandbox deletes one sandbox. A sandbox the provider no longer has
// (404) counts as deleted, so a repeated cleanup succeeds.
func (c *Client) DeleteSandbox(ctx context.Context, externalID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.base+"/sandboxes/"+url.PathEscape(externalID), nil)
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", externalID, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", externalID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotFound {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("delete sandbox %s: provider answered %s: %s", externalID, resp.Status, strings.TrimSpace(string(body)))
}

// Sandbox is one sandbox as the provider lists it.
type Sandbox struct {
	ExternalID       string  `json:"external_id"`
	Name             string  `json:"name"`
	LabDurationHours float64 `json:"lab_duration_hours"`
}

// Page is one answer of GET /sandboxes: some of the provider's
// sandboxes, and the token of the next page, empty on the last.
type Page struct {
	Sandboxes     []Sandbox `json:"sandboxes"`
	NextPageToken string    `json:"next_page_token,omitempty"`
}

// Listing limits. A page is read into memory, so its size is bounded; the
// page count only stops a provider whose tokens never end.
const (
	maxPageBytes = 16 << 20
	maxPages     = 10_000
)

// ListSandboxes lists every sandbox the provider has, following
// next_page_token (sent back as ?page_token=) to the last page. Members
// it does not know are ignored, so the provider may add some; the caller
// validates the entries.
func (c *Client) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	all := []Sandbox{}
	token := ""
	for page := 0; page < maxPages; page++ {
		p, err := c.listPage(ctx, token)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Sandboxes...)
		if p.NextPageToken == "" {
			return all, nil
		}
		if p.NextPageToken == token {
			return nil, fmt.Errorf("list sandboxes: provider answered page token %q with itself", token)
		}
		token = p.NextPageToken
	}
	return nil, fmt.Errorf("list sandboxes: more than %d pages", maxPages)
}

func (c *Client) listPage(ctx context.Context, token string) (Page, error) {
	u := c.base + "/sandboxes"
	if token != "" {
		u += "?" + url.Values{"page_token": {token}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Page{}, fmt.Errorf("list sandboxes: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return Page{}, fmt.Errorf("list sandboxes: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Page{}, fmt.Errorf("list sandboxes: provider answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var p Page
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxPageBytes+1))
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Page{}, fmt.Errorf("list sandboxes: a page is cut short or larger than %d bytes: %w", maxPageBytes, err)
		}
		return Page{}, fmt.Errorf("list sandboxes: provider's answer is not a page of sandboxes: %w", err)
	}
	return p, nil
}
