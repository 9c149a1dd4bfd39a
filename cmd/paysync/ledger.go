package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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
var _ payroll.StoreInfo = ledgerTokens{}

const credentialName = "payroll"

// pendingSuffix names the file beside a ledger that does not exist yet
// where a dry run (which never creates a ledger) keeps the refresh token
// it rotated; the ledger takes it over when it is created, so the token
// is never spent twice.
const pendingSuffix = ".token.json"

func pendingTokenPath(ledgerPath string) string { return ledgerPath + pendingSuffix }

func (t ledgerTokens) pending() *payroll.FileStore {
	return &payroll.FileStore{Path: pendingTokenPath(t.l.Path())}
}

func (t ledgerTokens) Load(ctx context.Context) (payroll.StoredToken, error) {
	rt, seed, at, err := t.l.Credentials(ctx, credentialName)
	if errors.Is(err, ledger.ErrNoCredentials) {
		// A dry run from before the ledger existed may have kept one.
		return t.pending().Load(ctx)
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
	if err := t.l.SaveCredentials(ctx, credentialName, st.RefreshToken, st.Seed, st.AccessToken, st.Issued, st.Expiry); err != nil {
		return err
	}
	// The ledger holds the newest token now; a dry run's file is spent.
	// Best effort: the ledger's own token wins over it in Load anyway.
	_ = os.Remove(pendingTokenPath(t.l.Path()))
	return nil
}

// Lock takes the ledger's token lock and the one a dry run takes while
// the ledger does not exist, so that the two never spend a token at once.
func (t ledgerTokens) Lock(ctx context.Context) (func(), error) {
	unlock, err := payroll.LockFile(ctx, t.l.Path()+".token-lock")
	if err != nil {
		return nil, err
	}
	unlockPending, err := t.pending().Lock(ctx)
	if err != nil {
		unlock()
		return nil, err
	}
	return func() { unlockPending(); unlock() }, nil
}

func (t ledgerTokens) Where() string { return "ledger " + t.l.Path() }

func (t ledgerTokens) RotatedElsewhere(ctx context.Context, seed string) ([]string, []string) {
	p := t.l.Path()
	return rotatedElsewhere(ctx, seed, []string{filepath.Dir(p), stateDir()}, p, pendingTokenPath(p))
}

// fileTokens is a token file (PAYSYNC_TOKEN_FILE, or the one a dry run
// keeps beside a ledger that does not exist yet).
type fileTokens struct {
	*payroll.FileStore
}

var _ payroll.StoreInfo = fileTokens{}

func (f fileTokens) Where() string {
	if lp, ok := strings.CutSuffix(f.Path, pendingSuffix); ok {
		if _, err := os.Stat(lp); err != nil {
			return fmt.Sprintf("ledger %s (not created yet; a dry run keeps its token in %s)", lp, f.Path)
		}
	}
	return "token file " + f.Path
}

func (f fileTokens) RotatedElsewhere(ctx context.Context, seed string) ([]string, []string) {
	return rotatedElsewhere(ctx, seed, []string{filepath.Dir(f.Path), stateDir()}, f.Path)
}

// stateDir is paysync's default state directory ($XDG_STATE_HOME/paysync).
func stateDir() string { return filepath.Dir(payroll.DefaultTokenPath()) }

// maxScanned bounds the files rotatedElsewhere reads per directory.
const maxScanned = 200

// rotatedElsewhere names the ledgers (*.db) and token files (*.json) in
// dirs, other than skip, that hold a refresh token rotated from the
// initial token with fingerprint seed, and returns the directories it
// looked in. Ledgers are only read (another process may be using them);
// files that cannot be read are passed over.
func rotatedElsewhere(ctx context.Context, seed string, dirs []string, skip ...string) (found, looked []string) {
	if seed == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	skipped := map[string]bool{}
	for _, p := range skip {
		skipped[abs(p)] = true
	}
	seen := map[string]bool{}
	for _, dir := range dirs {
		dir = abs(dir)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		looked = append(looked, dir)
		n := 0
		for _, e := range entries {
			name := e.Name()
			isLedger, isFile := strings.HasSuffix(name, ".db"), strings.HasSuffix(name, ".json")
			p := filepath.Join(dir, name)
			if !e.Type().IsRegular() || (!isLedger && !isFile) || skipped[p] {
				continue
			}
			if n++; n > maxScanned || ctx.Err() != nil {
				break
			}
			var rt, s string
			if isLedger {
				rt, s, err = ledger.ReadCredentials(ctx, p, credentialName)
			} else {
				var st payroll.StoredToken
				st, err = (&payroll.FileStore{Path: p}).Load(ctx)
				rt, s = st.RefreshToken, st.Seed
			}
			if err != nil || s != seed || rt == "" || payroll.Fingerprint(rt) == seed {
				continue // not rotated from it (or the initial token itself: no rotation)
			}
			if isLedger {
				found = append(found, "ledger "+p)
			} else {
				found = append(found, "token file "+p)
			}
		}
	}
	return found, looked
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
