package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/paysync/paysync/worker"
)

// errNotOwner means the ledger holds work for a company whose subjects
// this replica's NATS filter does not take.
var errNotOwner = worker.ErrNotOwner

// checkOwnership is worker.CheckOwnership with the operator's hint (see
// ownershipHint). run passes PAYSYNC_NATS_SUBJECT when PAYSYNC_NATS_FILTER
// is unset, as the consumer does.
func checkOwnership(_ context.Context, companies []string, filter string) error {
	return ownershipHint(worker.CheckOwnership(companies, filter))
}

// ownershipHint adds to a *worker.NotOwnerError what to do about it: the
// filter is wrong, or the ledger, or the company is moving and must be
// drained here first (docs/scaling.md). Other errors pass unchanged.
func ownershipHint(err error) error {
	var ne *worker.NotOwnerError
	if !errors.As(err, &ne) {
		return err
	}
	which := strings.Join(ne.Companies, ", ")
	return fmt.Errorf("run: %w: %s (PAYSYNC_NATS_FILTER %q does not take %s); "+
		"started, this replica would write to payroll for a company another replica owns. "+
		"If the filter is right, PAYSYNC_LEDGER points at the wrong ledger. "+
		"If you are moving %s to another replica, drain it here first: run this replica with its previous filter "+
		"(or 'paysync run --once' with it) until 'paysync batches --state pending' (and --state failed, sending, reverting) "+
		"shows no batch of %s, then change the filter and start the new owner (docs/scaling.md)",
		errNotOwner, which, ne.Filter, ne.Example(), which, which)
}
