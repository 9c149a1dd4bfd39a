package payroll_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

func TestTokenSource_ExpiryMidRunIsRefreshed(t *testing.T) {
	// Keycloak reports expires_in in whole seconds: 1s is the smallest
	// lifetime a client can see coming.
	e := startSandbox(t, sandbox.Options{Rotate: true, AccessTTL: time.Second})
	c := e.client(t)
	ctx := ctxT(t)
	deadline := time.Now().Add(2600 * time.Millisecond)
	calls := 0
	for time.Now().Before(deadline) {
		if _, err := c.PayPartsMeta(ctx); err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		calls++
		time.Sleep(20 * time.Millisecond)
	}
	st := e.sb.State()
	if r := c.Tokens().Refreshes(); r < 3 {
		t.Errorf("%d refreshes over 2.6 token lifetimes, want >= 3", r)
	}
	if st.Counters.Unauthorized != 0 {
		t.Errorf("%d requests went out with an expired token; refresh must happen ahead of expiry", st.Counters.Unauthorized)
	}
}

// A token that expires sooner than announced is caught by the 401 path:
// one refresh, one resend, no failed call.
func TestTokenSource_EarlyExpiryRecoversBy401(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true, AccessTTL: 100 * time.Millisecond})
	c := e.client(t)
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		if _, err := c.PayPartsMeta(ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	if e.sb.State().Counters.Unauthorized == 0 {
		t.Error("expected the sandbox to answer 401 for expired tokens")
	}
}

// Two processes one after the other with the same initial token: the second
// must use the rotated token the first persisted.
func TestTokenSource_RotationPersistedAcrossRestarts(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	initial := e.sb.IssueRefreshToken()
	path := filepath.Join(t.TempDir(), "token.json")
	for i := 0; i < 3; i++ {
		cfg := e.config(t)
		cfg.RefreshToken = initial
		cfg.Store = &payroll.FileStore{Path: path}
		c, err := payroll.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CurrentCompany(ctxT(t)); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %04o, want 0600", fi.Mode().Perm())
	}
	st, err := (&payroll.FileStore{Path: path}).Load(context.Background())
	if err != nil || st.RefreshToken == initial || st.Seed != payroll.Fingerprint(initial) {
		t.Errorf("stored = %+v, %v; want a rotated token descending from the initial one", st.Seed, err)
	}
}

// A new initial token (the operator re-connected) wins over the stored
// successor of the old one.
func TestTokenSource_NewInitialTokenStartsOver(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	path := filepath.Join(t.TempDir(), "token.json")
	run := func(rt string) error {
		cfg := e.config(t)
		cfg.RefreshToken = rt
		cfg.Store = &payroll.FileStore{Path: path}
		c, err := payroll.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CurrentCompany(ctxT(t))
		return err
	}
	if err := run(e.sb.IssueRefreshToken()); err != nil {
		t.Fatal(err)
	}
	e.sb.RevokeAll()                                      // the user disconnected ...
	if err := run(e.sb.IssueRefreshToken()); err != nil { // ... and connected again
		t.Fatalf("with a new initial token: %v", err)
	}
}

func TestTokenSource_ConcurrentCallsRefreshOnce(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	c := e.client(t)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.PayPartsMeta(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := e.sb.State().Counters.TokenGrants["refresh_token"]; got != 1 {
		t.Errorf("refresh grants = %d, want 1", got)
	}
}

// failingStore cannot save: the rotated token must not be used.
type failingStore struct{}

func (failingStore) Load(context.Context) (payroll.StoredToken, error) {
	return payroll.StoredToken{}, payroll.ErrNoStoredToken
}
func (failingStore) Save(context.Context, payroll.StoredToken) error { return errors.New("disk full") }

func TestTokenSource_UnsavableRotationIsNotUsed(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	cfg := e.config(t)
	cfg.Store = failingStore{}
	c, err := payroll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PayPartsMeta(ctxT(t))
	if payroll.ClassOf(err) != payroll.NotApplied || !errors.Is(err, err) || e.sb.State().Counters.Requests["pay_parts_meta"] != 0 {
		t.Fatalf("err = %v; the access token must not be used before its refresh token is saved", err)
	}
}

func TestFileStore_RefusesReadableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token.json")
	if err := os.WriteFile(path, []byte(`{"refresh_token":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := (&payroll.FileStore{Path: path}).Load(context.Background())
	if err == nil {
		t.Fatal("Load of a 0644 token file: want error")
	}
}

func TestFileStore_SaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "token.json")
	fs := &payroll.FileStore{Path: path}
	if _, err := fs.Load(context.Background()); !errors.Is(err, payroll.ErrNoStoredToken) {
		t.Fatalf("Load of a missing file = %v, want ErrNoStoredToken", err)
	}
	want := payroll.StoredToken{RefreshToken: "rt-2", Seed: "abc"}
	if err := fs.Save(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	got, err := fs.Load(context.Background())
	if err != nil || got.RefreshToken != want.RefreshToken || got.Seed != want.Seed {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

// An operator re-connects while a process runs: the configured initial
// token is refused (revoked), and `paysync auth` saves a new token (of its
// own lineage) into the store. The running client picks it up on its next
// call, without a restart, and keeps what it rotates from it in the store.
func TestTokenSource_ReconnectSavedToStoreIsPickedUp(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	store := &payroll.FileStore{Path: filepath.Join(t.TempDir(), "token.json")}
	cfg := e.config(t)
	cfg.Store = store
	c, err := payroll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := c.CurrentCompany(ctx); err != nil {
		t.Fatal(err)
	}
	e.sb.RevokeAll() // the account was disconnected
	if c.Tokens().Revoked() {
		t.Fatal("Revoked before any refresh was refused")
	}
	if _, err := c.CurrentCompany(ctx); !errors.Is(err, payroll.ErrRevoked) {
		t.Fatalf("after the revocation: %v, want revoked", err)
	}
	if !c.Tokens().Revoked() {
		t.Error("Revoked() is false after the refresh was refused")
	}
	// The operator connects again; the new token goes to the store, as
	// `paysync auth password --save` writes it.
	fresh := e.sb.IssueRefreshToken()
	if err := store.Save(ctx, payroll.StoredToken{RefreshToken: fresh, Seed: payroll.Fingerprint(fresh)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CurrentCompany(ctx); err != nil {
		t.Fatalf("after a new token was saved: %v; want it used without a restart", err)
	}
	if c.Tokens().Revoked() {
		t.Error("Revoked() is still true after a refresh worked")
	}
	st, err := store.Load(ctx)
	if err != nil || st.RefreshToken == fresh || st.Seed != payroll.Fingerprint(fresh) {
		t.Errorf("stored seed %q (err %v); want the successor of the saved token, of its lineage %q", st.Seed, err, payroll.Fingerprint(fresh))
	}
	// A new process with the same (dead) configured token starts at once.
	c2, err := payroll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.CurrentCompany(ctx); err != nil {
		t.Fatalf("a new process with the refused configured token: %v; want the stored one used", err)
	}
}
