// Command docgen rewrites the generated sections of docs/: each table's
// keys, indexes, TTL, stream and attributes, taken from store.Tables (the
// definitions provisioning reads) and from the item structs (attribute
// names from their dynamodbav tags, meanings from their field doc
// comments). Everything outside the markers is left as written.
//
//	go run ./internal/docgen          # rewrite docs/*.md in place (make docs)
//	go run ./internal/docgen -check   # list the pages that are out of date, exit 1 if any
//
// A page asks for a table's section with a pair of markers:
//
//	<!-- BEGIN generated: table SandboxPool -->
//	<!-- END generated -->
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "change nothing; list the pages out of date and exit 1 if any")
	flag.Parse()
	pages, err := Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	var stale []string
	for _, p := range pages {
		if !p.Changed() {
			continue
		}
		stale = append(stale, p.Path)
		if !*check {
			if err := os.WriteFile(p.Path, p.New, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "docgen:", err)
				os.Exit(1)
			}
		}
	}
	switch {
	case *check && len(stale) > 0:
		fmt.Fprintf(os.Stderr, "docgen: out of date: %s (run `make docs`)\n", strings.Join(stale, ", "))
		os.Exit(1)
	case len(stale) > 0:
		fmt.Println("docgen: rewrote", strings.Join(stale, ", "))
	}
}
