package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"transit/messages"
)

// runSchema prints or writes the JSON Schema catalogue for producers. It
// needs no AWS settings, so it parses only its own flags.
func runSchema(_ context.Context, args []string) error {
	fs := newFlagSet("schema")
	typ := fs.String("type", "", "only this type's schemas: a command, an event (both when they share the name), or envelope")
	out := fs.String("out", "", "write the schemas under this directory (commands/, events/, envelope.json) instead of printing them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	files, err := messages.Schemas()
	if err != nil {
		return fmt.Errorf("generate schemas: %w", err)
	}
	if *typ != "" {
		files = schemasOf(files, *typ)
		if len(files) == 0 {
			return fmt.Errorf("no command or event type %q (nor envelope)", *typ)
		}
	}
	if *out == "" {
		// One JSON document after another: jq and most JSON readers take
		// such a stream.
		for _, f := range files {
			if _, err := os.Stdout.Write(f.JSON); err != nil {
				return fmt.Errorf("print %s: %w", f.Path, err)
			}
		}
		return nil
	}
	for _, f := range files {
		path := filepath.Join(*out, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write schemas: %w", err)
		}
		if err := os.WriteFile(path, f.JSON, 0o644); err != nil {
			return fmt.Errorf("write schemas: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "wrote %d schemas under %s\n", len(files), *out)
	return nil
}

func schemasOf(files []messages.SchemaFile, typ string) []messages.SchemaFile {
	var kept []messages.SchemaFile
	for _, f := range files {
		if string(f.Type) == typ || (typ == "envelope" && f.Kind == messages.EnvelopeSchema) {
			kept = append(kept, f)
		}
	}
	return kept
}
