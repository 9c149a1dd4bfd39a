package worker

import (
	"errors"
	"fmt"
	"strings"

	"github.com/paysync/paysync/worker/stream"
)

// ErrNotOwner means the ledger holds work for a company whose subjects
// this replica's NATS filter does not take.
var ErrNotOwner = errors.New("this ledger holds unsent work for companies outside the NATS filter")

// NotOwnerError names the companies outside the filter.
type NotOwnerError struct {
	Companies []string // the companies with unsent work the filter does not take
	Filter    string
}

func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("%v: %s (filter %q does not take %s)", ErrNotOwner, strings.Join(e.Companies, ", "), e.Filter, e.Example())
}

func (e *NotOwnerError) Unwrap() error { return ErrNotOwner }

// Example is a subject of the first company outside the filter.
func (e *NotOwnerError) Example() string {
	prefix, _, _ := strings.Cut(e.Filter, ".")
	if prefix == "*" || prefix == ">" {
		prefix = stream.DefaultPrefix
	}
	return prefix + "." + e.Companies[0] + ".<source>"
}

// CheckOwnership refuses a replica whose ledger (companies: the ones it
// holds unsent work for, see ledger.CompaniesWithWork) covers a company
// that its consumer filter does not take (stream.FilterTakesCompany): a
// *NotOwnerError. Each company must have exactly one writer: if this
// replica started anyway, it would send that work while the replica whose
// filter takes the company sends for it too, each ledger blind to the
// other's pay parts (reconciliation could then claim the other's pay part
// as its own, and an hour would be lost). An empty filter takes every
// company.
func CheckOwnership(companies []string, filter string) error {
	filter = strings.TrimSpace(filter)
	if filter == "" {
		return nil
	}
	var outside []string
	for _, c := range companies {
		if !stream.FilterTakesCompany(filter, c) {
			outside = append(outside, c)
		}
	}
	if len(outside) == 0 {
		return nil
	}
	return &NotOwnerError{Companies: outside, Filter: filter}
}
