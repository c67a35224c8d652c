package store

import (
	"context"
	"errors"
	"testing"
)

func TestRetry_runs_again_while_stale_within_its_rounds(t *testing.T) {
	ctx := context.Background()
	other := errors.New("other")
	for _, c := range []struct {
		name   string
		rounds int
		stale  int   // tries that return errStale before the last one
		last   error // what the last try returns
		tries  int
		want   error
	}{
		{"done at once", 3, 0, nil, 1, nil},
		{"an error ends it", 3, 1, other, 2, other},
		{"fresh on the last round", 3, 2, nil, 3, nil},
		{"stale every round", 3, 3, nil, 3, errConflict},
		{"one round", 1, 1, nil, 1, errConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			tries := 0
			err := retry(ctx, "thing", c.rounds, func() error {
				tries++
				if tries <= c.stale {
					return errStale
				}
				return c.last
			})
			if tries != c.tries || !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("%d tries, %v; want %d, %v", tries, err, c.tries, c.want)
			}
			if c.want == errConflict && err.Error() != "thing: "+errConflict.Error() {
				t.Fatalf("error %q does not name what was retried", err)
			}
		})
	}
}

func TestRetry_stops_when_its_context_ends(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := retry(ctx, "thing", 20, func() error {
		tries++
		cancel()
		return errStale
	})
	if tries != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("%d tries, %v; want 1, context.Canceled", tries, err)
	}
}
