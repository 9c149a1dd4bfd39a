package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
)

// ledgerEnv is the sandbox's environment with the token kept in the
// ledger at path (no PAYSYNC_TOKEN_FILE).
func ledgerEnv(s sandboxEnv, path string) map[string]string {
	env := with(s.env, "PAYSYNC_LEDGER", path, "PAYSYNC_LOG_LEVEL", "error")
	delete(env, "PAYSYNC_TOKEN_FILE")
	return env
}

func assertNoFile(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: %s exists (stat: %v)", what, path, err)
	}
}

// A dry run with a ledger path that does not exist creates no ledger
// (README: "never creates one"), yet the token it rotates is kept: the
// first real run takes it over instead of spending the initial token again
// (which the server would refuse as reused).
func TestImport_DryRunWithNewLedgerCreatesNone(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Rotate: true, AccessTTL: time.Second})
	path := filepath.Join(t.TempDir(), "new.db")
	env := ledgerEnv(s, path)
	const sample = "../../deploy/examples/entries.ndjson"

	r := runInProcess(t, env, "import", "--dry-run", sample)
	if r.code != 0 || !strings.Contains(r.stdout, "; 5 pay parts") {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	assertNoFile(t, path, "after a dry run")
	assertClean(t, r, env["PAYSYNC_CLIENT_SECRET"], env["PAYSYNC_REFRESH_TOKEN"])

	time.Sleep(1100 * time.Millisecond) // the access token expires: the next run refreshes
	if r := runInProcess(t, env, "import", "--dry-run", sample); r.code != 0 {
		t.Fatalf("second dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	assertNoFile(t, path, "after a second dry run")

	time.Sleep(1100 * time.Millisecond)
	if r := runInProcess(t, env, "import", sample); r.code != 0 {
		t.Fatalf("import after the dry runs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := s.sb.State().Counters
	if n := st.TokenErrors["invalid_grant"]; n != 0 {
		t.Errorf("%d refresh tokens refused: a token was spent twice", n)
	}
	if n := st.TokenGrants["refresh_token"]; n != 3 {
		t.Errorf("%d refreshes, want 3 (one per run)", n)
	}
	// The ledger holds the token now; the dry runs' file is gone.
	l, err := ledger.Open(context.Background(), path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, _, _, err := l.Credentials(context.Background(), credentialName)
	l.Close()
	if err != nil || rt == "" || rt == env["PAYSYNC_REFRESH_TOKEN"] {
		t.Fatalf("ledger credentials: %v (rotated %v)", err, rt != env["PAYSYNC_REFRESH_TOKEN"])
	}
	assertNoFile(t, path+".token.json", "once the ledger took the token over")
}

// A second ledger with the initial token the first one already rotated:
// nothing is sent (the server would refuse it as reused, and Keycloak, like
// the sandbox, would end the first ledger's session too), the error names
// the ledger that holds the token and what to do, and the first ledger's
// connection keeps working. A dry run says the same and creates nothing.
func TestCLI_SecondLedgerNamesTheFirst(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Rotate: true})
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.db"), filepath.Join(dir, "second.db")
	envA, envB := ledgerEnv(s, first), ledgerEnv(s, second)
	if r := runInProcess(t, envA, "meta"); r.code != 0 {
		t.Fatalf("first ledger: exit %d\n%s", r.code, r.stderr)
	}
	refused := s.sb.State().Counters.TokenErrors["invalid_grant"]

	// The dry run first: the second ledger does not exist then.
	for _, args := range [][]string{{"import", "--dry-run", "../../deploy/examples/entries.ndjson"}, {"meta"}} {
		r := runInProcess(t, envB, args...)
		t.Logf("%v: %s", args, r.stderr)
		if r.code != 1 {
			t.Fatalf("%v with the second ledger: exit %d, want 1\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{
			"ledger " + second, "has no refresh token of its own", "PAYSYNC_REFRESH_TOKEN",
			"ledger " + first + " holds the token it was rotated to", "did not send it", "PAYSYNC_LEDGER",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, r.stderr)
			}
		}
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
			t.Errorf("%v: want one line, got %d more:\n%s", args, n, r.stderr)
		}
		assertClean(t, r, envB["PAYSYNC_CLIENT_SECRET"], envB["PAYSYNC_REFRESH_TOKEN"])
		if args[0] == "import" {
			assertNoFile(t, second, "after the dry run")
		}
	}
	if n := s.sb.State().Counters.TokenErrors["invalid_grant"] - refused; n != 0 {
		t.Errorf("the used initial token was sent %d time(s)", n)
	}
	assertNoFile(t, second+".token.json", "the dry run kept a token it never got")
	if r := runInProcess(t, envA, "auth", "status"); r.code != 0 {
		t.Fatalf("first ledger afterwards: exit %d\n%s", r.code, r.stderr)
	}
}

// When the ledger that rotated the initial token is not where paysync
// looks, the token is sent and refused as reused; the error explains the
// situation instead of only "revoked".
func TestCLI_NewLedgerRefusedTokenIsExplained(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Rotate: true})
	elsewhere, here := filepath.Join(t.TempDir(), "a.db"), filepath.Join(t.TempDir(), "b.db")
	if r := runInProcess(t, ledgerEnv(s, elsewhere), "meta"); r.code != 0 {
		t.Fatalf("first ledger: exit %d\n%s", r.code, r.stderr)
	}
	env := ledgerEnv(s, here)
	r := runInProcess(t, env, "meta")
	t.Logf("%s", r.stderr)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"connection revoked: re-connect the payroll account (the payroll server refused the refresh token: invalid_grant: Maximum allowed refresh token reuse exceeded)",
		"ledger " + here + " has no refresh token of its own, so paysync used PAYSYNC_REFRESH_TOKEN", "used before, by another ledger or token file",
		"none holding it was found in " + filepath.Dir(here), "point PAYSYNC_LEDGER (or PAYSYNC_TOKEN_FILE) at that one", "set PAYSYNC_REFRESH_TOKEN to the new refresh token",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	assertClean(t, r, env["PAYSYNC_CLIENT_SECRET"], env["PAYSYNC_REFRESH_TOKEN"])
}
