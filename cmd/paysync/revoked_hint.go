package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
)

// A revoked token's "what to do" depends on whose token it was: the
// configured one (PAYSYNC_REFRESH_TOKEN, or one `paysync auth` stored)
// is replaced by a new refresh token; a connection's (paysync connect) by
// connecting that company again.

// connectionsRevoked is a revoked error of a command run where the ledger
// holds payroll connections: the hint names what to connect again.
type connectionsRevoked struct {
	err  error
	hint string
}

func (e *connectionsRevoked) Error() string { return e.err.Error() }
func (e *connectionsRevoked) Unwrap() error { return e.err }

// revokedDefaultFix is the single-token setup's what to do.
const revokedDefaultFix = "connect paysync to the payroll account again (Danløn: Integrations → connect), set PAYSYNC_REFRESH_TOKEN to the new refresh token, then check with 'paysync auth status'. Nothing was sent while the connection was revoked."

// withConnectionHint gives a revoked err the hint of the ledger's
// connections, when it holds any; err otherwise (also when the ledger
// cannot be read: the single-token hint is then said).
func withConnectionHint(ctx context.Context, err error, env lookupEnv) error {
	var initial *payroll.InitialTokenError
	if !errors.Is(err, payroll.ErrRevoked) || errors.As(err, &initial) {
		return err
	}
	cfg, loadErr := loadConfig(ctx, env)
	if loadErr != nil {
		return err
	}
	if _, statErr := os.Stat(cfg.ledgerPath()); statErr != nil {
		return err // no ledger, no connections (and none is created here)
	}
	l, openErr := ledger.Open(ctx, cfg.ledgerPath(), ledger.Options{})
	if openErr != nil {
		return err
	}
	defer l.Close()
	cs, lerr := l.Connections(ctx)
	if lerr != nil || len(cs) == 0 {
		return err
	}
	s := &session{cfg: &cfg, led: l}
	return &connectionsRevoked{err: err, hint: connectionFix(ctx, cs, cfg.CompanyID, s.defaultToken(ctx))}
}

// connectionFix names the companies to connect again: those whose
// connection is recorded revoked, else the connection commands use
// (PAYSYNC_COMPANY_ID's, else the oldest: connectionFor). With a
// configured token too, either may have been refused: both are said.
func connectionFix(ctx context.Context, cs []ledger.Connection, company string, configured bool) string {
	var revoked []ledger.Connection
	for _, c := range cs {
		if c.State == ledger.ConnectionRevoked {
			revoked = append(revoked, c)
		}
	}
	if len(revoked) == 0 {
		revoked = cs[:1]
		for _, c := range cs {
			if company != "" && c.Serves(company) {
				revoked = []ledger.Connection{c}
			}
		}
	}
	var names, ids []string
	for _, c := range revoked {
		names = append(names, companyLabel(c.Companies))
		for _, cc := range c.Companies {
			ids = append(ids, cc.ID)
		}
	}
	which := "that company"
	if len(ids) > 1 {
		which = "those companies"
	}
	fix := "the payroll connection of " + strings.Join(names, "; ") + " was revoked (disconnected in Danløn): run 'paysync connect' and choose " +
		which + " (" + strings.Join(ids, ", ") + "), then check with 'paysync connections'. Nothing was sent for it while the connection was revoked."
	if configured {
		return "if the configured token was refused: " + revokedDefaultFix + " If it was a connection's: " + fix
	}
	return fix
}
