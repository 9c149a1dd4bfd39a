package ledger

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"strings"
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

// ReadCredentials reads the refresh token and seed stored under name in
// the ledger at path without opening it as a ledger: read-only, nothing
// created, migrated or locked against its writer. It is for looking at a
// ledger another process may be using (which ledger holds the successor of
// an initial token). An error means it could not be read (not a ledger, no
// such file, busy); ErrNoCredentials that nothing is stored under name.
func ReadCredentials(ctx context.Context, path, name string) (refreshToken, seed string, err error) {
	file := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	query := "?mode=ro&_pragma=busy_timeout(1000)&_pragma=query_only(1)"
	if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		// Not in use (its last writer checkpointed and removed the WAL):
		// read the file as it is, leaving no -wal or -shm beside it.
		query = "?mode=ro&immutable=1&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", "file:"+file+query)
	if err != nil {
		return "", "", err
	}
	defer db.Close()
	err = db.QueryRowContext(ctx, `SELECT refresh_token, seed FROM credentials WHERE name = ?`, name).Scan(&refreshToken, &seed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", ErrNoCredentials
	}
	return refreshToken, seed, err
}
