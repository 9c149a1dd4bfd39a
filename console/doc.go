// Package console is paysync's operator console in the browser: the
// ledger's periods, imports, batches, rejects, the reconciler's units and
// the audit log as server-rendered pages (html/template, no JavaScript),
// what the reconciler would send now (the rows paysync plan prints), and
// the CLI's revert, replay, period close and open behind a preview and a
// confirmation.
//
// It acts through the CLI's own services: a revert or replay is
// worker.Operations (what counts changed, then the reconciler's plan
// applied; sent by the console's deliverer, or inside paysync run by the
// daemon's sending loop); a period is closed or opened with
// ledger.ClosePeriod and ReopenPeriod. A preview shows the entries the
// operation touches and the reconciler's plan for the target's company
// and period; the confirmation is refused when that changed meanwhile.
//
// Access: one password (PAYSYNC_CONSOLE_PASSWORD), through a login form
// (a session cookie: HttpOnly, SameSite=Strict, Secure over TLS) or HTTP
// Basic auth; without one it serves loopback only. Every POST carries the
// session's CSRF token and must come from the console's own origin; every
// action is written to the audit log, and its confirmation carries a
// one-time token, so a form submitted twice is carried out once.
package console
