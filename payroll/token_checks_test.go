package payroll_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

// CheckClient tells a right client id and secret from a wrong one without
// spending, or even sending, the connection's rotating refresh token.
func TestTokenSource_CheckClient(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	ctx := ctxT(t)
	c := e.client(t)
	if _, err := c.CurrentCompany(ctx); err != nil { // one refresh: the token rotates
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close()
	tests := []struct {
		name         string
		change       func(*payroll.Config)
		wantOK       bool
		wantRejected bool
	}{
		{"right", func(*payroll.Config) {}, true, false},
		{"wrong secret", func(c *payroll.Config) { c.ClientSecret = "wrong" }, false, true},
		{"no secret", func(c *payroll.Config) { c.ClientSecret = "" }, false, true},
		{"wrong client id", func(c *payroll.Config) { c.ClientID = "nope" }, false, true},
		{"unreachable", func(c *payroll.Config) { c.AuthURL = deadURL }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			grants := e.sb.State().Counters.TokenGrants["refresh_token"]
			cfg := e.config(t)
			cfg.RefreshToken, cfg.Store = "", nil
			tt.change(&cfg)
			pc, err := payroll.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = pc.Tokens().CheckClient(ctx)
			if (err == nil) != tt.wantOK || errors.Is(err, payroll.ErrClientRejected) != tt.wantRejected {
				t.Fatalf("CheckClient = %v; want ok %v, rejected %v", err, tt.wantOK, tt.wantRejected)
			}
			if err != nil && strings.Contains(err.Error(), e.opts.ClientSecret) {
				t.Errorf("the error shows the secret: %v", err)
			}
			if g := e.sb.State().Counters.TokenGrants["refresh_token"]; g != grants {
				t.Errorf("%d refresh grants during the check, want none", g-grants)
			}
		})
	}
	// The connection's rotated token was untouched: it still refreshes.
	c.Tokens().Invalidate(mustToken(t, c))
	if _, err := c.CurrentCompany(ctx); err != nil {
		t.Fatalf("after the checks: %v", err)
	}
	if r := c.Tokens().Refreshes(); r != 2 {
		t.Errorf("%d refreshes, want 2", r)
	}
}

func mustToken(t *testing.T, c *payroll.Client) string {
	t.Helper()
	tok, err := c.Tokens().Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// memStore is a token store that names itself and reports what other
// stores it was told hold a rotated token.
type memStore struct {
	payroll.FileStore
	others []string
}

func (m *memStore) Where() string { return "store " + m.Path }
func (m *memStore) RotatedElsewhere(context.Context, string) ([]string, []string) {
	return m.others, []string{filepath.Dir(m.Path)}
}

// A store with no token of its own does not spend an initial token that
// another store already rotated (a Keycloak realm would refuse it as
// reused and end the other store's session): the error says so, and the
// other store's connection keeps working.
func TestTokenSource_InitialTokenRotatedElsewhereIsNotSent(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	ctx := ctxT(t)
	first := e.config(t) // rotates the initial token into its store
	a, err := payroll.New(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CurrentCompany(ctx); err != nil {
		t.Fatal(err)
	}
	before := e.sb.State().Counters

	second := first
	second.Store = &memStore{FileStore: payroll.FileStore{Path: filepath.Join(t.TempDir(), "b.json")}, others: []string{"store A"}}
	b, err := payroll.New(second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.CurrentCompany(ctx)
	var ie *payroll.InitialTokenError
	if !errors.As(err, &ie) || ie.Err != nil || !errors.Is(err, payroll.ErrRevoked) {
		t.Fatalf("second store: %v; want an InitialTokenError (not sent), classed revoked", err)
	}
	for _, want := range []string{"store " + second.Store.(*memStore).Path + " has no refresh token of its own", "store A holds the token it was rotated to", "did not send it", "PAYSYNC_LEDGER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), first.RefreshToken) {
		t.Errorf("the error shows the refresh token")
	}
	after := e.sb.State().Counters
	if after.TokenErrors["invalid_grant"] != before.TokenErrors["invalid_grant"] || after.TokenGrants["refresh_token"] != before.TokenGrants["refresh_token"] {
		t.Errorf("the initial token was sent (grants %d → %d, refusals %d → %d)", before.TokenGrants["refresh_token"], after.TokenGrants["refresh_token"],
			before.TokenErrors["invalid_grant"], after.TokenErrors["invalid_grant"])
	}
	a.Tokens().Invalidate(mustToken(t, a))
	if _, err := a.CurrentCompany(ctx); err != nil {
		t.Fatalf("the first store's connection after the second was refused: %v", err)
	}
}

// When no other store is known, the initial token is spent; the server's
// refusal (reuse) is explained instead of only "revoked".
func TestTokenSource_RefusedInitialTokenIsExplained(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	ctx := ctxT(t)
	first := e.config(t)
	a, err := payroll.New(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CurrentCompany(ctx); err != nil {
		t.Fatal(err)
	}
	second := first
	second.Store = &memStore{FileStore: payroll.FileStore{Path: filepath.Join(t.TempDir(), "b.json")}}
	b, err := payroll.New(second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.CurrentCompany(ctx)
	var ie *payroll.InitialTokenError
	if !errors.As(err, &ie) || ie.Err == nil || !errors.Is(err, payroll.ErrRevoked) {
		t.Fatalf("second store: %v; want an InitialTokenError with the refusal, classed revoked", err)
	}
	for _, want := range []string{"has no refresh token of its own, so paysync used PAYSYNC_REFRESH_TOKEN", "invalid_grant: Maximum allowed refresh token reuse exceeded",
		"none holding it was found in", "set PAYSYNC_REFRESH_TOKEN to the new refresh token"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// A store that holds a token of its own gets the plain revocation.
	e.sb.RevokeAll()
	a.Tokens().Invalidate(mustToken(t, a))
	_, err = a.CurrentCompany(ctx)
	if !errors.Is(err, payroll.ErrRevoked) || errors.As(err, &ie) {
		t.Fatalf("revoked with a token of its own: %v; want a plain revocation", err)
	}
}
