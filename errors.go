package paysync

import "errors"

// ErrCompanyNotFound is wrapped by every error about a company the payroll
// account cannot see. It is the one directory failure that is a fault of
// the input (the entry names the company); every other failure to read a
// company is transient.
var ErrCompanyNotFound = errors.New("company not found")
