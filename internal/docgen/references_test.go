package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// outsideReferences are ways of pointing a reader at a document that is not
// in the repository: the design notes transit was built from. A fact they
// hold belongs in docs/ (or in the comment itself), where a reader of the
// repository can follow it.
var outsideReferences = regexp.MustCompile(strings.Join([]string{
	`\.\./shared\b`,
	`\bSPEC\b`,
	`\bSPEC\.md\b`,
	`\bseeds?/`,
	`\bEMULATORS\.md\b`,
	`\bSTYLE\.md\b`,
	`\b(sandbox-broker|durable-timers|layer-builds|nucleus-schedules|agent-tasks)\.md\b`,
}, "|"))

// TestRepository_references_no_file_outside_it greps every tracked file.
func TestRepository_references_no_file_outside_it(t *testing.T) {
	self := filepath.ToSlash(filepath.Join("internal", "docgen", "references_test.go"))
	var hits []string
	for _, path := range trackedFiles(t) {
		if path == self || path == "go.sum" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, path))
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			continue // deleted in the work tree, or binary
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if outsideReferences.MatchString(sc.Text()) {
				hits = append(hits, path+":"+strconv.Itoa(n)+": "+strings.TrimSpace(sc.Text()))
			}
		}
	}
	if len(hits) > 0 {
		t.Fatalf("%d references to files outside the repository; link the docs/ page that holds the fact, or state the fact:\n%s",
			len(hits), strings.Join(hits, "\n"))
	}
}

func TestOutsideReferences_pattern(t *testing.T) {
	for _, s := range []string{"see ../shared/EMULATORS.md", "SPEC §3", "seeds/sandbox-broker.md", "(durable-timers.md)", "STYLE.md: one suite"} {
		require.True(t, outsideReferences.MatchString(s), s)
	}
	for _, s := range []string{"docs/delivery.md", "DECISIONS.md", "specification", "seeds the pool", "SPECIAL"} {
		require.False(t, outsideReferences.MatchString(s), s)
	}
}

// trackedFiles lists the repository's files relative to its root: git's
// list when git is there, else every file but .git's.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(repoRoot, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}
