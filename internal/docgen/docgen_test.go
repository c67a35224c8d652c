package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"transit/store"
)

const repoRoot = "../.."

// TestDocs_match_the_code fails when a table definition or an item struct
// changed and docs/ was not regenerated.
func TestDocs_match_the_code(t *testing.T) {
	pages, err := Generate(repoRoot)
	require.NoError(t, err)
	var stale []string
	for _, p := range pages {
		if p.Changed() {
			stale = append(stale, p.Path)
		}
	}
	if len(stale) > 0 {
		t.Fatalf("%s out of date with store/tables.go or the item structs: run `make docs` (go run ./internal/docgen) and commit the result",
			strings.Join(stale, ", "))
	}
}

// TestDocs_show_every_table: each table transit provisions has its
// generated section on some page (Generate also fails without one).
func TestDocs_show_every_table(t *testing.T) {
	pages, err := Generate(repoRoot)
	require.NoError(t, err)
	shown := map[string]bool{}
	for _, p := range pages {
		for _, name := range p.Tables {
			shown[name] = true
		}
	}
	for _, tbl := range store.Tables {
		require.True(t, shown[tbl.Name], "table %s is on no docs page", tbl.Name)
	}
}

func TestGenerate_rewrites_only_between_markers(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"store", "streams"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
		files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(root, dir, filepath.Base(f)), b, 0o644))
		}
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	var page strings.Builder
	page.WriteString("# Page\n\nHand-written.\n\n")
	for _, tbl := range store.Tables {
		page.WriteString("<!-- BEGIN generated: table " + tbl.Name + " -->\nstale text\n<!-- END generated -->\n\nMore prose.\n")
	}
	path := filepath.Join(root, "docs", "all.md")
	require.NoError(t, os.WriteFile(path, []byte(page.String()), 0o644))

	pages, err := Generate(root)
	require.NoError(t, err)
	require.Len(t, pages, 1)
	got := string(pages[0].New)
	require.True(t, pages[0].Changed())
	require.NotContains(t, got, "stale text")
	require.True(t, strings.HasPrefix(got, "# Page\n\nHand-written.\n\n"))
	require.Equal(t, len(store.Tables), strings.Count(got, "More prose."))
	require.Contains(t, got, "| `status` | S | `Status string` | always | StatusIndex partition |")

	// Generating again changes nothing.
	require.NoError(t, os.WriteFile(path, pages[0].New, 0o644))
	again, err := Generate(root)
	require.NoError(t, err)
	require.False(t, again[0].Changed())
}

func TestGenerate_refuses_broken_pages(t *testing.T) {
	for _, tc := range []struct {
		Name string
		Page string
		Want string
	}{
		{Name: "unknown_table", Page: "<!-- BEGIN generated: table Nope -->\n<!-- END generated -->\n", Want: `no table "Nope"`},
		{Name: "unknown_machine", Page: "<!-- BEGIN generated: machine nope -->\n<!-- END generated -->\n", Want: `no machine "nope"`},
		{Name: "missing_end", Page: "<!-- BEGIN generated: table Audit -->\n", Want: "BEGIN markers"},
		{Name: "table_on_no_page", Page: "nothing generated\n", Want: "no docs page shows table"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, os.Symlink(filepath.Join(mustAbs(t, repoRoot), "store"), filepath.Join(root, "store")))
			require.NoError(t, os.Symlink(filepath.Join(mustAbs(t, repoRoot), "streams"), filepath.Join(root, "streams")))
			require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "x.md"), []byte(tc.Page), 0o644))
			_, err := Generate(root)
			require.ErrorContains(t, err, tc.Want)
		})
	}
}

func TestMeaning_drops_the_field_name(t *testing.T) {
	require.Equal(t, "The sandbox's state.", meaning("Status", "Status is the sandbox's state.\n"))
	require.Equal(t, "Counts failed calls.", meaning("Attempts", "Attempts counts failed calls."))
	require.Equal(t, "When DynamoDB removes the item.", meaning("TTL", "TTL is when DynamoDB\nremoves the item."))
	require.Equal(t, "Unix seconds of the allocation.", meaning("AllocatedAt", "Unix seconds of the allocation."))
	require.Equal(t, "lyr#<region>.<package>: one partition.", meaning("PK", "PK is lyr#<region>.<package>: one partition."))
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	require.NoError(t, err)
	return abs
}
