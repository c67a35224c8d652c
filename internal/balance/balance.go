// Package balance is the rule by which replicas split a set of leased
// units between them: the timer shards (timers) and the shards of a
// DynamoDB stream (streams). How each counts the live replicas and takes,
// steals or hands back a unit stays with its owner; see DECISIONS.md.
package balance

import (
	"maps"
	"slices"
)

// Share is an even share of units between replicas: each holds at least
// Low and at most High; they differ when the units do not divide evenly.
type Share struct{ Low, High int }

// Of is the share of units between replicas (at least one: the caller).
func Of(units, replicas int) Share {
	replicas = max(1, replicas)
	return Share{Low: units / replicas, High: (units + replicas - 1) / replicas}
}

// Plan is one replica's moves in a balancing round.
type Plan struct {
	Share Share
	// Shed is how many units to hand back.
	Shed int
	// Take is how many free units to take at most.
	Take int
	// Donor is the replica that should give a unit to one below Low: the
	// one holding most above Low (ties: the first by name); empty when no
	// replica is below Low or none holds more.
	Donor string
}

// Round plans self's moves from the units each live replica holds (self
// and the replicas known to hold none included; units held by none are
// free). A replica above High hands back the excess. Replicas below Low
// take first: the others take only free units beyond what those need, and
// when the free units do not cover that need, the replica holding most
// above Low (the donor) hands one back. So an even split is reached even
// when High alone is met by everyone (four units on three replicas could
// otherwise stay 2, 2, 0), and no unit is handed back while free ones
// would do.
func Round(self string, held map[string]int, units int) Plan {
	counts := maps.Clone(held)
	if counts == nil {
		counts = map[string]int{}
	}
	counts[self] += 0
	p := Plan{Share: Of(units, len(counts))}
	free, need := units, 0
	for _, owner := range slices.Sorted(maps.Keys(counts)) {
		n := counts[owner]
		free -= n
		need += max(0, p.Share.Low-n)
		if n > p.Share.Low && (p.Donor == "" || n > counts[p.Donor]) {
			p.Donor = owner
		}
	}
	free = max(0, free)
	if need <= free {
		p.Donor = ""
	}
	mine := counts[self]
	switch {
	case mine > p.Share.High:
		p.Shed = mine - p.Share.High
	case p.Donor == self:
		p.Shed = 1
	case mine < p.Share.Low:
		p.Take = p.Share.Low - mine
	default:
		p.Take = max(0, min(p.Share.High-mine, free-need))
	}
	return p
}
