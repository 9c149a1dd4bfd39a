package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/paysync/paysync/worker/stream"
)

// errNotOwner means the ledger holds work for a company whose subjects
// this replica's NATS filter does not take.
var errNotOwner = errors.New("this ledger holds unsent work for companies outside the NATS filter")

// checkOwnership refuses a replica whose ledger (companies: the ones it
// holds unsent work for, see ledger.CompaniesWithWork) covers a company
// that its consumer filter does not take. Each company must have exactly
// one writer: if this replica started anyway, it would send that work
// while the replica whose filter takes the company sends for it too, each
// ledger blind to the other's pay parts (reconciliation could then claim
// the other's pay part as its own, and an hour would be lost).
//
// Entries are published on timesheets.<company>.<source>: the company is
// the second token. A filter takes a company when it matches some subject
// <prefix>.<company>.<source> ('*' is one token, '>' the rest; the prefix
// is not checked: the stream's subjects decide it). An empty filter takes
// every company; run passes PAYSYNC_NATS_SUBJECT when PAYSYNC_NATS_FILTER is
// unset, as the consumer does.
func checkOwnership(ctx context.Context, companies []string, filter string) error {
	filter = strings.TrimSpace(filter)
	if filter == "" || len(companies) == 0 {
		return nil
	}
	var outside []string
	for _, c := range companies {
		if !filterTakesCompany(filter, c) {
			outside = append(outside, c)
		}
	}
	if len(outside) == 0 {
		return nil
	}
	which := strings.Join(outside, ", ")
	prefix, _, _ := strings.Cut(filter, ".")
	if prefix == "*" || prefix == ">" {
		prefix = stream.DefaultPrefix
	}
	example := prefix + "." + outside[0] + ".<source>"
	return fmt.Errorf("run: %w: %s (PAYSYNC_NATS_FILTER %q does not take %s); "+
		"started, this replica would write to payroll for a company another replica owns. "+
		"If the filter is right, PAYSYNC_LEDGER points at the wrong ledger. "+
		"If you are moving %s to another replica, drain it here first: run this replica with its previous filter "+
		"(or 'paysync run --once' with it) until 'paysync batches --state pending' (and --state failed, sending, reverting) "+
		"shows no batch of %s, then change the filter and start the new owner (docs/scaling.md)",
		errNotOwner, which, filter, example, which, which)
}

// filterTakesCompany reports whether filter matches some subject
// <prefix>.<company>.<source>.
func filterTakesCompany(filter, company string) bool {
	tokens := strings.Split(filter, ".")
	for i, t := range tokens {
		switch {
		case t == ">":
			return true // the rest, whatever it is
		case i >= 3:
			return false // longer than any entry subject
		case i == 1 && t != "*" && t != company:
			return false
		}
	}
	return len(tokens) == 3
}
