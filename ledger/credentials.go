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

// SaveCredentials replaces the stored refresh token, with the access token
// that came with it ("" for none), durably: the transaction is committed
// with synchronous=FULL before this returns.
func (l *Ledger) SaveCredentials(ctx context.Context, name, refreshToken, seed, accessToken string, issued, expiry time.Time) error {
	exp, iss := "", ""
	if !expiry.IsZero() {
		exp, iss = expiry.UTC().Format(tsLayout), issued.UTC().Format(tsLayout)
	}
	return l.tx(ctx, "save credentials", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO credentials (name, refresh_token, seed, updated_at, access_token, access_issued, access_expiry) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET refresh_token = excluded.refresh_token, seed = excluded.seed, updated_at = excluded.updated_at,
				access_token = excluded.access_token, access_issued = excluded.access_issued, access_expiry = excluded.access_expiry`,
			name, refreshToken, seed, l.ts(), accessToken, iss, exp)
		return err
	})
}

// AccessToken returns the stored access token with when it was issued and
// when it expires ("" when none).
func (l *Ledger) AccessToken(ctx context.Context, name string) (token string, issued, expiry time.Time, err error) {
	var is, ex string
	err = l.db.QueryRowContext(ctx, `SELECT access_token, access_issued, access_expiry FROM credentials WHERE name = ?`, name).Scan(&token, &is, &ex)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, time.Time{}, nil
	}
	return token, parseTS(is), parseTS(ex), err
}
