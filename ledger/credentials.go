package ledger

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ErrNoCredentials is returned when nothing is stored under a name.
var ErrNoCredentials = errors.New("no stored credentials")

// Credentials returns the stored refresh token and the fingerprint of the
// initial token it descends from.
func (l *Ledger) Credentials(ctx context.Context, name string) (refreshToken, seed string, updated time.Time, err error) {
	var at string
	err = l.db.QueryRowContext(ctx, `SELECT refresh_token, seed, updated_at FROM credentials WHERE name = ?`, name).Scan(&refreshToken, &seed, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", time.Time{}, ErrNoCredentials
	}
	return refreshToken, seed, parseTS(at), err
}

// SaveCredentials replaces the stored refresh token (durably: the
// transaction is committed with synchronous=FULL before this returns).
func (l *Ledger) SaveCredentials(ctx context.Context, name, refreshToken, seed string) error {
	return l.tx(ctx, "save credentials", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO credentials (name, refresh_token, seed, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET refresh_token = excluded.refresh_token, seed = excluded.seed, updated_at = excluded.updated_at`,
			name, refreshToken, seed, l.ts())
		return err
	})
}
