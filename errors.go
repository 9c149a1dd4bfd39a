package paysync

import "errors"

// FailureKind says what a failed payroll call means for the caller's next
// step. Every error of the payroll client carries one (payroll.Error.Class);
// KindOf reads it from any error.
type FailureKind int

// The failure kinds.
const (
	// NotApplied: the request certainly did not execute (connection refused,
	// 429, 401 before execution, a request the server rejected while
	// validating it). Safe to retry, after the server's Retry-After.
	NotApplied FailureKind = iota + 1
	// Rejected: the server executed the request and refused it. Permanent.
	Rejected
	// Ambiguous: the request may have executed (timeout after sending,
	// connection reset, 5xx, an unreadable answer). A mutation must be
	// reconciled against the server's state before any retry.
	Ambiguous
	// Revoked: the refresh token was refused (invalid_grant). Nothing can be
	// sent until an operator re-connects the payroll account.
	Revoked
)

func (k FailureKind) String() string {
	switch k {
	case NotApplied:
		return "not applied"
	case Rejected:
		return "rejected"
	case Ambiguous:
		return "ambiguous"
	case Revoked:
		return "revoked"
	}
	return "unknown"
}

// KindOf returns the failure kind an error carries (an error in its chain
// with a FailureKind method), or 0 when none does.
func KindOf(err error) FailureKind {
	var k interface{ FailureKind() FailureKind }
	if errors.As(err, &k) {
		return k.FailureKind()
	}
	return 0
}

// ErrCompanyNotFound is wrapped by every error about a company the payroll
// account cannot see. It is the one directory failure that is a fault of
// the input (the entry names the company); every other failure to read a
// company is transient.
var ErrCompanyNotFound = errors.New("company not found")
