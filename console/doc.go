// Package console is paysync's operator console in the browser: the
// ledger's periods, imports, batches, rejects and corrections as
// server-rendered pages (html/template, no JavaScript), what the
// reconciler would send now (the rows paysync plan prints), and the CLI's
// revert, replay and period close and open behind a preview and a
// confirmation.
//
// It exists because the people who check what went to payroll and undo a
// wrong import are payroll administrators, not shell users. It reads the
// ledger (and, read-only, the NATS dead letters) and acts through the same
// services as the CLI: a revert or replay of a batch, an import or a
// period (of one company, or all) is worker.Operations — the ledger's
// desired state changed, then the one reconciler plans and applies the
// difference (worker.Reconciler), sent by the console's deliverer, or
// inside paysync run by the daemon's sending loop — and a period is closed
// or opened with ledger.ClosePeriod and ReopenPeriod. So a revert from the
// console is the revert `paysync revert` does. Its preview shows the
// entries the operation touches and what the reconciler plans for the
// target's company and period before it; the confirmation is refused when
// that changed meanwhile.
//
// Access: one password (PAYSYNC_CONSOLE_PASSWORD), through a login form
// (a session cookie: HttpOnly, SameSite=Strict, Secure over TLS) or HTTP
// Basic auth with any user name (scripts). Without a password it serves
// loopback only, and only to requests that name a loopback host. Every
// POST carries the session's CSRF token and must come from the console's
// own origin; every action is written to the ledger's audit log (as the
// CLI's are), and its confirmation form carries a one-time token, so a
// form submitted twice is carried out once.
package console
