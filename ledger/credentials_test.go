package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// ReadCredentials reads another ledger's token without changing anything
// beside it: closed (nothing is left behind), in use by a writer (what is
// only in its WAL is seen), without credentials, and not a ledger at all.
func TestReadCredentials(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "l.db")
	names := func() []string {
		es, _ := os.ReadDir(dir)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	l, err := Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadCredentials(ctx, p, "payroll"); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("nothing stored: %v, want ErrNoCredentials", err)
	}
	if err := l.SaveCredentials(ctx, "payroll", "rt1", "seed", "", time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	before := names()
	if rt, seed, err := ReadCredentials(ctx, p, "payroll"); err != nil || rt != "rt1" || seed != "seed" {
		t.Fatalf("closed ledger: %q %q %v", rt, seed, err)
	}
	if after := names(); !slices.Equal(before, after) {
		t.Errorf("reading a closed ledger changed its directory: %v → %v", before, after)
	}

	l, err = Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SaveCredentials(ctx, "payroll", "rt2", "seed", "", time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if rt, _, err := ReadCredentials(ctx, p, "payroll"); err != nil || rt != "rt2" {
		t.Fatalf("ledger in use: %q %v, want the newest token", rt, err)
	}
	if err := l.SaveCredentials(ctx, "payroll", "rt3", "seed", "", time.Time{}, time.Time{}); err != nil {
		t.Fatalf("the writer after a read: %v", err)
	}

	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte("not a database, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadCredentials(ctx, junk, "payroll"); err == nil || errors.Is(err, ErrNoCredentials) {
		t.Errorf("not a ledger: %v, want an error", err)
	}
	if _, _, err := ReadCredentials(ctx, filepath.Join(dir, "missing.db"), "payroll"); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading a missing ledger created it (%v)", err)
	}
}
