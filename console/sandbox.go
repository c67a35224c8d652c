package console

import (
	"net/http"
	"time"

	"transit/machine"
	"transit/store"
)

type sandboxGroup struct {
	Status    string
	Sandboxes []sandboxRow
}

type sandboxRow struct {
	store.Sandbox
	// Until is when an allocation's lab window closes; zero otherwise.
	Until time.Time
}

// sandboxes shows the pool by status: who holds each allocated sandbox
// and until when.
func (c *Console) sandboxes(w http.ResponseWriter, r *http.Request) {
	var groups []sandboxGroup
	total := 0
	for _, status := range machine.Sandbox.States {
		sbs, err := c.svc.Store.Sandboxes(r.Context(), status)
		if err != nil {
			c.fail(w, r, "the sandbox pool", err)
			return
		}
		g := sandboxGroup{Status: status}
		for _, sb := range sbs {
			row := sandboxRow{Sandbox: sb}
			if sb.Status == store.StatusAllocated {
				row.Until = time.Unix(sb.ExpiresAt(), 0).UTC()
			}
			g.Sandboxes = append(g.Sandboxes, row)
		}
		total += len(sbs)
		groups = append(groups, g)
	}
	c.render(w, r, http.StatusOK, "sandboxes", map[string]any{"Groups": groups, "Total": total})
}
