package paysync

// CheckLevel is how a probe of one part of a set-up went.
type CheckLevel int

// Check levels.
const (
	CheckOK      CheckLevel = iota // it works
	CheckWarn                      // it works, but is worth a look
	CheckFail                      // it does not work
	CheckSkipped                   // not looked at: something it needs failed (Detail says what)
)

func (l CheckLevel) String() string {
	switch l {
	case CheckOK:
		return "ok"
	case CheckWarn:
		return "warn"
	case CheckFail:
		return "fail"
	case CheckSkipped:
		return "skipped"
	}
	return "unknown"
}

// Check is what an adapter's probe found about one part of the set-up (the
// ledger, the NATS stream, the inbox): what was found or what is wrong, in
// the adapter's own terms. What to do about it, naming the environment
// variable or command, is the caller's to add (paysync doctor, /readyz):
// the adapter does not know how it was configured.
type Check struct {
	Level  CheckLevel
	Detail string
	// Err is the cause of a warning or failure, for errors.Is against the
	// adapter's sentinel errors (and errors.As for the path it concerns).
	Err error
}

// OK reports whether the part works (possibly with a warning).
func (c Check) OK() bool { return c.Level == CheckOK || c.Level == CheckWarn }

// Checked returns a Check of level with detail and cause err.
func Checked(level CheckLevel, err error, detail string) Check {
	return Check{Level: level, Detail: detail, Err: err}
}

// Problem returns nil when the part works (possibly with a warning), else
// an error saying what is wrong that wraps Err: the shape of a /readyz
// condition.
func (c Check) Problem() error {
	if c.OK() {
		return nil
	}
	return &checkError{c.Detail, c.Err}
}

type checkError struct {
	detail string
	err    error
}

func (e *checkError) Error() string { return e.detail }
func (e *checkError) Unwrap() error { return e.err }
