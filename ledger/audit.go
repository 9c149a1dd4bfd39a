package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The audit log records the actions operators take (the console's, and
// the CLI's revert, replay and period close): who, from where, what, and
// how it ended. A confirmation form's one-time token is recorded with its
// action, so that a form submitted twice is carried out once.

// AuditResult is how an audited action ended.
type AuditResult string

// Audit results.
const (
	AuditStarted AuditResult = "started" // begun, not finished (or interrupted)
	AuditDone    AuditResult = "done"
	AuditFailed  AuditResult = "failed"
)

// AuditEntry is one audited action.
type AuditEntry struct {
	ID         int64       `json:"id"`
	Token      string      `json:"-"`
	Actor      string      `json:"actor"`
	Remote     string      `json:"remote,omitempty"`
	Action     string      `json:"action"`
	Scope      string      `json:"scope"`
	Result     AuditResult `json:"result"`
	Detail     string      `json:"detail,omitempty"`
	StartedAt  time.Time   `json:"started_at"`
	FinishedAt time.Time   `json:"finished_at,omitzero"`
}

// ErrAuditTokenUsed: the one-time token was used before (the form was
// submitted already); BeginAudit returns that action's entry with it.
var ErrAuditTokenUsed = errors.New("this form was submitted before")

// BeginAudit records an action as started and returns its id. A token
// recorded before (e.g. a form submitted twice) is refused with
// ErrAuditTokenUsed and the entry that used it.
func (l *Ledger) BeginAudit(ctx context.Context, e AuditEntry) (int64, AuditEntry, error) {
	var id int64
	var used AuditEntry
	err := l.tx(ctx, "audit", func(tx *sql.Tx) error {
		if e.Token != "" {
			row := tx.QueryRowContext(ctx, `SELECT `+auditCols+` FROM audit_log WHERE token = ?`, e.Token)
			switch u, err := scanAudit(row); {
			case err == nil:
				used = u
				return ErrAuditTokenUsed
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO audit_log (token, actor, remote, action, scope, result, detail, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			nullText(e.Token), e.Actor, e.Remote, e.Action, e.Scope, AuditStarted, e.Detail, l.ts())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if errors.Is(err, ErrAuditTokenUsed) {
		return 0, used, ErrAuditTokenUsed
	}
	return id, AuditEntry{}, err
}

// FinishAudit records how action id ended.
func (l *Ledger) FinishAudit(ctx context.Context, id int64, result AuditResult, detail string) error {
	return l.tx(ctx, "audit", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE audit_log SET result = ?, detail = ?, finished_at = ? WHERE id = ?`, result, detail, l.ts(), id)
		return err
	})
}

// AuditLog lists the audited actions, newest first (limit 0: all).
func (l *Ledger) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	q := `SELECT ` + auditCols + ` FROM audit_log ORDER BY id DESC`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rows, err := l.rdb.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: audit log: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

const auditCols = `id, coalesce(token, ''), actor, remote, action, scope, result, detail, started_at, coalesce(finished_at, '')`

func scanAudit(sc interface{ Scan(...any) error }) (AuditEntry, error) {
	var e AuditEntry
	var s, f string
	err := sc.Scan(&e.ID, &e.Token, &e.Actor, &e.Remote, &e.Action, &e.Scope, &e.Result, &e.Detail, &s, &f)
	e.StartedAt, e.FinishedAt = parseTS(s), parseTS(f)
	return e, err
}

// nullText stores "" as NULL (a UNIQUE column holds many NULLs).
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
