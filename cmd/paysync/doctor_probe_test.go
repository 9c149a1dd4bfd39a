package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
)

// The doctor's hints come from the adapters' typed causes, not from their
// messages: each names the variable or the command.
func TestDoctor_LedgerAndInboxHints(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, env map[string]string) map[string]string
		check string
		has   []string
	}{
		{"ledger readable by others", func(t *testing.T, env map[string]string) map[string]string {
			p := env["PAYSYNC_LEDGER"]
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return env
		}, "ledger", []string{"mode 0644", "fix: chmod 600 "}},
		{"ledger directory missing", func(t *testing.T, env map[string]string) map[string]string {
			return with(env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "nope", "ledger.db"))
		}, "ledger", []string{"does not exist", "fix: create the directory (mkdir -p ", "or correct PAYSYNC_LEDGER"}},
		{"inbox missing", func(t *testing.T, env map[string]string) map[string]string {
			return with(env, "PAYSYNC_INBOX", filepath.Join(t.TempDir(), "nope"))
		}, "inbox", []string{"does not exist", "fix: create it (mkdir -p ", "or correct PAYSYNC_INBOX"}},
		{"inbox schedule", func(t *testing.T, env map[string]string) map[string]string {
			return with(env, "PAYSYNC_INBOX", t.TempDir(), "PAYSYNC_SCHEDULE", "every minute")
		}, "inbox", []string{`schedule "every minute"`, "fix: correct PAYSYNC_SCHEDULE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSandbox(t, sandbox.Options{})
			env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_LOG_LEVEL", "error")
			env = tt.setup(t, env)
			r := runDoctorCLI(t, env)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
			}
			sym, line := doctorLine(t, r.stdout, tt.check)
			t.Log(line)
			if sym != "✗" {
				t.Errorf("got %s, want ✗: %s", sym, line)
			}
			for _, h := range tt.has {
				if !strings.Contains(line, h) {
					t.Errorf("line lacks %q: %s", h, line)
				}
			}
		})
	}
}

// loadConfig and validate name the variable in a typed error that is
// still a usage error (exit 2).
func TestLoadConfig_VarError(t *testing.T) {
	env := func(kv ...string) lookupEnv {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	_, err := loadConfig(context.Background(), env("PAYSYNC_HTTP_TIMEOUT", "soon"))
	var ve *varError
	var ue *usageError
	if !errors.As(err, &ve) || ve.Var != "PAYSYNC_HTTP_TIMEOUT" || !errors.As(err, &ue) {
		t.Fatalf("loadConfig: %v (%T), want a usage error naming PAYSYNC_HTTP_TIMEOUT", err, err)
	}
	cfg, err := loadConfig(context.Background(), env("PAYSYNC_PAYROLL_URL", "http://x", "PAYSYNC_CLIENT_ID", "c", "PAYSYNC_AUTH_REALM", "a b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); !errors.As(err, &ve) || ve.Var != "PAYSYNC_AUTH_REALM" || report(err, new(strings.Builder)) != 2 {
		t.Fatalf("validate: %v, want PAYSYNC_AUTH_REALM, exit 2", err)
	}
}
