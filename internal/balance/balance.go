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
// and the replicas known to hold none included). A replica above High
// hands back the excess. While a replica is below Low, only replicas
// below Low take free units, and the donor hands back one, so an even
// split is reached even when High alone is already met by everyone
// (four units on three replicas could otherwise stay 2, 2, 0).
func Round(self string, held map[string]int, units int) Plan {
	replicas := len(held)
	if _, ok := held[self]; !ok {
		replicas++
	}
	p := Plan{Share: Of(units, replicas)}
	mine := held[self]
	needy := false
	for _, owner := range slices.Sorted(maps.Keys(held)) {
		n := held[owner]
		if n < p.Share.Low {
			needy = true
		}
		if n > p.Share.Low && (p.Donor == "" || n > held[p.Donor]) {
			p.Donor = owner
		}
	}
	if mine < p.Share.Low {
		needy = true
	}
	if !needy {
		p.Donor = ""
	}
	switch {
	case mine > p.Share.High:
		p.Shed = mine - p.Share.High
	case p.Donor == self:
		p.Shed = 1
	case mine < p.Share.Low:
		p.Take = p.Share.Low - mine
	case !needy:
		p.Take = p.Share.High - mine
	}
	return p
}
