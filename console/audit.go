package console

import (
	"errors"
	"net/http"
	"strings"

	"transit/store"
)

// historyPage and traceLimit bound what one page reads.
const (
	historyPage = 50
	traceLimit  = 500
)

// history shows an entity's recorded outcomes, newest first, as
// `transit audit` does: entity is SANDBOX#<id>, TIMER#<id>, TASK#<id>….
func (c *Console) history(w http.ResponseWriter, r *http.Request) {
	entity := strings.TrimSpace(r.URL.Query().Get("entity"))
	data := map[string]any{"Entity": entity}
	if entity != "" {
		page, err := c.svc.Store.EntityHistory(r.Context(), entity, historyPage, r.URL.Query().Get("cursor"))
		if errors.Is(err, store.ErrBadCursor) {
			http.Error(w, "bad cursor", http.StatusBadRequest)
			return
		}
		if err != nil {
			c.fail(w, r, "the history of "+entity, err)
			return
		}
		data["Records"], data["Next"] = page.Items, page.Next
	}
	c.render(w, r, http.StatusOK, "history", data)
}

// trace shows a correlation's causal chain as a tree, as `transit trace`.
func (c *Console) trace(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.URL.Query().Get("correlation"))
	data := map[string]any{"Correlation": id}
	if id != "" {
		tr, err := c.svc.Trace(r.Context(), id, traceLimit)
		if err != nil {
			c.fail(w, r, "the trace of "+id, err)
			return
		}
		data["Trace"] = tr
	}
	c.render(w, r, http.StatusOK, "trace", data)
}
