// Package provider talks to the external sandbox provider, the service
// that hosts the lab sandboxes (docs/sandbox.md), over HTTP.
package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client deletes sandboxes at the provider: DELETE {base}/sandboxes/{external_id}.
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
