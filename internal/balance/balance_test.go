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
	assert.Zero(t, p.Take, "not below Low while another replica is")
	// The donor hands back one for it.
	p = balance.Round("a", map[string]int{"a": 2, "b": 2, "c": 0}, 4)
	assert.Equal(t, 1, p.Shed)
	// Balanced: nothing to do but take up to High.
	p = balance.Round("a", map[string]int{"a": 1, "b": 2, "c": 1}, 4)
	assert.Equal(t, balance.Plan{Share: balance.Share{Low: 1, High: 2}, Take: 1}, p)
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
