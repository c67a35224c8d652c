package balance_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/internal/balance"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		units, replicas int
		want            balance.Share
	}{
		{units: 10, replicas: 1, want: balance.Share{Low: 10, High: 10}},
		{units: 10, replicas: 3, want: balance.Share{Low: 3, High: 4}},
		{units: 9, replicas: 3, want: balance.Share{Low: 3, High: 3}},
		{units: 2, replicas: 3, want: balance.Share{Low: 0, High: 1}},
		{units: 0, replicas: 2, want: balance.Share{Low: 0, High: 0}},
		{units: 5, replicas: 0, want: balance.Share{Low: 5, High: 5}},
	} {
		assert.Equal(t, c.want, balance.Of(c.units, c.replicas), "%d units, %d replicas", c.units, c.replicas)
	}
}

func TestRound(t *testing.T) {
	// Above High: hand back the excess.
	p := balance.Round("a", map[string]int{"a": 6, "b": 2}, 8)
	assert.Equal(t, 2, p.Shed)
	// A newcomer below Low takes up to Low; the others wait for it.
	p = balance.Round("c", map[string]int{"a": 2, "b": 2, "c": 0}, 4)
	assert.Equal(t, balance.Plan{Share: balance.Share{Low: 1, High: 2}, Take: 1, Donor: "a"}, p)
	p = balance.Round("b", map[string]int{"a": 2, "b": 1, "c": 0}, 4)
	assert.Zero(t, p.Take, "the one free unit is the newcomer's")
	// No unit free for it: the donor hands back one.
	p = balance.Round("a", map[string]int{"a": 2, "b": 2, "c": 0}, 4)
	assert.Equal(t, 1, p.Shed)
	// Free units cover the need: nobody hands back (a replica that looks
	// alive but crashed must not make the others shed units nobody takes).
	p = balance.Round("a", map[string]int{"a": 4, "b": 3, "c": 2}, 10)
	assert.Zero(t, p.Shed)
	assert.Equal(t, balance.Plan{Share: balance.Share{Low: 3, High: 4}}, p)
	p = balance.Round("b", map[string]int{"a": 4, "b": 3, "c": 2}, 10)
	assert.Zero(t, p.Take, "the free unit is left for c")
	// Balanced: take up to High what nobody else needs.
	p = balance.Round("a", map[string]int{"a": 1, "b": 2, "c": 1}, 5)
	assert.Equal(t, balance.Plan{Share: balance.Share{Low: 1, High: 2}, Take: 1}, p)
}

// A replica that crashed (its units not lapsed yet) never takes: the live
// ones hand back at most what it lacks beyond the free units.
func TestRound_a_silent_replica_costs_one_unit_at_most(t *testing.T) {
	held := map[string]int{"a": 4, "b": 4, "c": 2}
	free := 0
	for range 10 {
		for _, self := range []string{"a", "b"} {
			p := balance.Round(self, held, 10)
			held[self] -= p.Shed
			free += p.Shed
			n := min(free, p.Take)
			held[self] += n
			free -= n
		}
	}
	assert.LessOrEqual(t, free, 1, "units left free waiting for c: %v", held)
}

// Replicas that each follow Round, one at a time in any order, from any
// start, reach an even split with every unit held.
func TestRound_converges(t *testing.T) {
	for units := 0; units <= 16; units++ {
		for replicas := 1; replicas <= 5; replicas++ {
			for _, start := range []string{"one took all", "spread"} {
				t.Run(fmt.Sprintf("%d/%d/%s", units, replicas, start), func(t *testing.T) {
					names := make([]string, replicas)
					held := map[string]int{}
					for i := range names {
						names[i] = string(rune('a' + i))
						held[names[i]] = 0
					}
					if start == "one took all" {
						held[names[replicas-1]] = units
					} else {
						for i := range units {
							held[names[i%replicas]]++
						}
					}
					free := 0
					for round := range 4 * (units + 1) {
						// Rotate who goes first each round.
						for i := range names {
							self := names[(i+round)%replicas]
							p := balance.Round(self, held, units)
							held[self] -= p.Shed
							free += p.Shed
							n := min(free, p.Take)
							held[self] += n
							free -= n
						}
					}
					share := balance.Of(units, replicas)
					total := 0
					for _, n := range held {
						total += n
						require.GreaterOrEqual(t, n, share.Low, "%v", held)
						require.LessOrEqual(t, n, share.High, "%v", held)
					}
					assert.Equal(t, units, total, "every unit held: %v", held)
				})
			}
		}
	}
}
