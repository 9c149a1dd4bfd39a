package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Payroll connections: what `paysync connect` stored. Each has its own
// rotating refresh token (in credentials, under Credential) and serves the
// companies listed for it; the daemon sends each company's pay parts
// through its connection.

// The states of a connection, as the daemon last saw it.
const (
	ConnectionActive  = "active"
	ConnectionRevoked = "revoked" // the token endpoint refused its refresh token (invalid_grant)
	ConnectionFailing = "failing" // its refresh failed otherwise (network, 5xx)
)

// ErrNoConnection is returned when no connection has the given id.
var ErrNoConnection = errors.New("no such payroll connection")

// ConnectionCompany is a company a connection serves.
type ConnectionCompany struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Connection is one stored payroll connection (never its token).
type Connection struct {
	ID          int64
	Credential  string // the credentials row holding its refresh token
	Companies   []ConnectionCompany
	CreatedAt   time.Time
	State       string
	StateAt     time.Time
	Reason      string    // why it is revoked or failing
	LastRefresh time.Time // when its refresh token was last saved (a refresh, or the connect)
}

// Serves reports whether the connection serves company.
func (c Connection) Serves(company string) bool {
	return slices.ContainsFunc(c.Companies, func(cc ConnectionCompany) bool { return cc.ID == company })
}

// AddConnection stores a new connection serving companies, with the
// refresh token (and access token) code2token returned, in one durable
// transaction. The companies are taken from the connections that served
// them; a connection left serving none is removed, and its refresh token
// returned in replaced, for the caller to revoke.
func (l *Ledger) AddConnection(ctx context.Context, companies []ConnectionCompany, refreshToken, accessToken string, issued, expiry time.Time) (c Connection, replaced []string, err error) {
	if len(companies) == 0 {
		return Connection{}, nil, errors.New("ledger: add connection: no company")
	}
	if refreshToken == "" {
		return Connection{}, nil, errors.New("ledger: add connection: no refresh token")
	}
	exp, iss := "", ""
	if !expiry.IsZero() {
		exp, iss = expiry.UTC().Format(tsLayout), issued.UTC().Format(tsLayout)
	}
	now := l.ts()
	err = l.tx(ctx, "add connection", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO connections (credential, created_at, state, state_at) VALUES ('', ?, 'active', ?)`, now, now)
		if err != nil {
			return err
		}
		if c.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		c.Credential = fmt.Sprintf("connection-%d", c.ID)
		if _, err := tx.ExecContext(ctx, `UPDATE connections SET credential = ? WHERE id = ?`, c.Credential, c.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO credentials (name, refresh_token, seed, updated_at, access_token, access_issued, access_expiry) VALUES (?, ?, '', ?, ?, ?, ?)`,
			c.Credential, refreshToken, now, accessToken, iss, exp); err != nil {
			return err
		}
		for _, cc := range companies {
			if _, err := tx.ExecContext(ctx, `INSERT INTO connection_companies (company_id, connection, name) VALUES (?, ?, ?)
				ON CONFLICT (company_id) DO UPDATE SET connection = excluded.connection, name = excluded.name`, cc.ID, c.ID, cc.Name); err != nil {
				return err
			}
		}
		// Connections that serve no company any more.
		rows, err := tx.QueryContext(ctx, `SELECT c.id, c.credential, coalesce(k.refresh_token, '') FROM connections c LEFT JOIN credentials k ON k.name = c.credential
			WHERE NOT EXISTS (SELECT 1 FROM connection_companies cc WHERE cc.connection = c.id)`)
		if err != nil {
			return err
		}
		var gone []int64
		var creds []string
		for rows.Next() {
			var id int64
			var cred, rt string
			if err := rows.Scan(&id, &cred, &rt); err != nil {
				rows.Close()
				return err
			}
			gone, creds = append(gone, id), append(creds, cred)
			if rt != "" {
				replaced = append(replaced, rt)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i, id := range gone {
			if err := removeConnection(ctx, tx, id, creds[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Connection{}, nil, err
	}
	c.Companies = slices.Clone(companies)
	c.CreatedAt, c.StateAt, c.LastRefresh = parseTS(now), parseTS(now), parseTS(now)
	c.State = ConnectionActive
	return c, replaced, nil
}

func removeConnection(ctx context.Context, tx *sql.Tx, id int64, credential string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM connection_companies WHERE connection = ?`, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM connections WHERE id = ?`, id); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM credentials WHERE name = ?`, credential)
	return err
}

// Connections returns the stored connections, oldest first, each with the
// companies it serves (by id).
func (l *Ledger) Connections(ctx context.Context) ([]Connection, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT c.id, c.credential, c.created_at, c.state, c.state_at, c.reason, coalesce(k.updated_at, ''),
			coalesce(cc.company_id, ''), coalesce(cc.name, '')
		FROM connections c LEFT JOIN credentials k ON k.name = c.credential LEFT JOIN connection_companies cc ON cc.connection = c.id
		ORDER BY c.id, cc.company_id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: connections: %w", err)
	}
	defer rows.Close()
	var out []Connection
	for rows.Next() {
		var c Connection
		var created, stateAt, refreshed, company, name string
		if err := rows.Scan(&c.ID, &c.Credential, &created, &c.State, &stateAt, &c.Reason, &refreshed, &company, &name); err != nil {
			return nil, fmt.Errorf("ledger: connections: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].ID != c.ID {
			c.CreatedAt, c.StateAt, c.LastRefresh = parseTS(created), parseTS(stateAt), parseTS(refreshed)
			out = append(out, c)
		}
		if company != "" {
			last := &out[len(out)-1]
			last.Companies = append(last.Companies, ConnectionCompany{ID: company, Name: name})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: connections: %w", err)
	}
	return out, nil
}

// SetConnectionState records what the daemon saw of a connection; the
// state's time changes only with the state.
func (l *Ledger) SetConnectionState(ctx context.Context, id int64, state, reason string) error {
	switch state {
	case ConnectionActive, ConnectionRevoked, ConnectionFailing:
	default:
		return fmt.Errorf("ledger: set connection state: unknown state %q", state)
	}
	return l.tx(ctx, "set connection state", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE connections SET state_at = CASE WHEN state = ? THEN state_at ELSE ? END, state = ?, reason = ? WHERE id = ?`,
			state, l.ts(), state, strings.TrimSpace(reason), id)
		return err
	})
}

// RemoveConnection deletes a connection, its companies and its token.
func (l *Ledger) RemoveConnection(ctx context.Context, id int64) error {
	return l.tx(ctx, "remove connection", func(tx *sql.Tx) error {
		var cred string
		err := tx.QueryRowContext(ctx, `SELECT credential FROM connections WHERE id = ?`, id).Scan(&cred)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNoConnection
		}
		if err != nil {
			return err
		}
		return removeConnection(ctx, tx, id, cred)
	})
}

// SaveConnectionToken replaces a connection's rotated refresh token (with
// the access token that came with it), durably, like SaveCredentials; it
// returns ErrNoConnection once the connection was removed (disconnect),
// so that a token rotated meanwhile is not kept for nobody.
func (l *Ledger) SaveConnectionToken(ctx context.Context, credential, refreshToken, accessToken string, issued, expiry time.Time) error {
	exp, iss := "", ""
	if !expiry.IsZero() {
		exp, iss = expiry.UTC().Format(tsLayout), issued.UTC().Format(tsLayout)
	}
	return l.tx(ctx, "save connection token", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE credentials SET refresh_token = ?, updated_at = ?, access_token = ?, access_issued = ?, access_expiry = ?
			WHERE name = ? AND EXISTS (SELECT 1 FROM connections WHERE credential = ?)`, refreshToken, l.ts(), accessToken, iss, exp, credential, credential)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNoConnection
		}
		return nil
	})
}
