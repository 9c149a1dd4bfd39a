package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
)

// ledgerTokens keeps the rotated refresh token in the ledger's credentials
// table; refreshes are serialized across processes by a lock file beside
// the ledger.
type ledgerTokens struct {
	l *ledger.Ledger
}

var _ payroll.TokenStore = ledgerTokens{}
var _ payroll.Locker = ledgerTokens{}

const credentialName = "payroll"

func (t ledgerTokens) Load(ctx context.Context) (payroll.StoredToken, error) {
	rt, seed, at, err := t.l.Credentials(ctx, credentialName)
	if errors.Is(err, ledger.ErrNoCredentials) {
		return payroll.StoredToken{}, payroll.ErrNoStoredToken
	}
	if err != nil {
		return payroll.StoredToken{}, err
	}
	st := payroll.StoredToken{RefreshToken: rt, Seed: seed, UpdatedAt: at}
	if st.AccessToken, st.Issued, st.Expiry, err = t.l.AccessToken(ctx, credentialName); err != nil {
		return payroll.StoredToken{}, err
	}
	return st, nil
}

func (t ledgerTokens) Save(ctx context.Context, st payroll.StoredToken) error {
	return t.l.SaveCredentials(ctx, credentialName, st.RefreshToken, st.Seed, st.AccessToken, st.Issued, st.Expiry)
}

func (t ledgerTokens) Lock(ctx context.Context) (func(), error) {
	return payroll.LockFile(ctx, t.l.Path()+".token-lock")
}

// ledgerPath is PAYSYNC_LEDGER, else $XDG_STATE_HOME/paysync/ledger.db.
func (c *config) ledgerPath() string {
	if c.Ledger != "" {
		return c.Ledger
	}
	return filepath.Join(filepath.Dir(payroll.DefaultTokenPath()), "ledger.db")
}

// openLedger opens the configured ledger, creating its directory (0700) when
// it is the default one.
func (c *config) openLedger(ctx context.Context) (*ledger.Ledger, error) {
	p := c.ledgerPath()
	if c.Ledger == "" {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, err
		}
	}
	return ledger.Open(ctx, p, ledger.Options{})
}
