package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/streams"
)

// The Grafana dashboard cannot drift from what transit serves: every
// transit_* series its queries read is one transit registers, filtered
// only by labels that series has, and every panel reads the dashboard's
// data source variable.
func TestDashboard_reads_only_what_transit_serves(t *testing.T) {
	registered := servedSeries()
	b, err := os.ReadFile("../docs/grafana/transit.json")
	require.NoError(t, err)
	var dashboard struct {
		Panels []struct {
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Query      any    `json:"query"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &dashboard))

	var variables []string
	var exprs []string
	for _, v := range dashboard.Templating.List {
		variables = append(variables, v.Name+":"+v.Type)
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	assert.Contains(t, variables, "datasource:datasource")
	assert.Contains(t, variables, "domain:query")
	panels := 0
	for _, p := range dashboard.Panels {
		if p.Type == "row" {
			continue
		}
		panels++
		assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q", p.Title)
		assert.NotEmpty(t, p.Targets, "panel %q", p.Title)
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	require.Positive(t, panels)

	seen := map[string]bool{}
	for _, expr := range exprs {
		for _, m := range selector.FindAllStringSubmatch(expr, -1) {
			name, matchers := m[1], m[2]
			if _, ok := registered[name]; !ok {
				// A histogram's series.
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, cut := strings.CutSuffix(name, suffix); cut && registered[base] != nil {
						name = base
					}
				}
			}
			labels, ok := registered[name]
			if !assert.True(t, ok, "%s in %q is not a series transit serves", m[1], expr) {
				continue
			}
			seen[name] = true
			for _, l := range matcherLabel.FindAllStringSubmatch(matchers, -1) {
				assert.True(t, slices.Contains(labels, l[1]) || l[1] == "le", "%s has no label %s (%q)", name, l[1], expr)
			}
		}
	}
	// Every series transit serves of its own is on the dashboard.
	for name := range registered {
		assert.True(t, seen[name], "%s is on no panel", name)
	}
}

var (
	// selector is a transit series in a query, with its label matchers.
	selector     = regexp.MustCompile(`\b(transit_[a-zA-Z0-9_]+)(?:\{([^}]*)\})?`)
	matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	descName     = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
)

// servedSeries are the transit_* series an instance serving every domain
// registers, each with its label names.
func servedSeries() map[string][]string {
	m := New()
	m.Register(NewCalls())
	m.Watch(State{
		StreamShards: func() []streams.ShardLag { return nil },
		TimerShards:  func() int { return 0 },
		Queues:       func() []QueueDepth { return nil },
	})
	ch := make(chan *prometheus.Desc)
	go func() {
		m.registry.Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		if s := descName.FindStringSubmatch(d.String()); s != nil && strings.HasPrefix(s[1], "transit_") {
			out[s[1]] = strings.Split(s[2], ",")
		}
	}
	return out
}
