package ledger

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

func TestCheckPath(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string
		err   error // errors.Is; nil: passes
	}{
		{"new ledger", func(t *testing.T, dir string) string { return filepath.Join(dir, "ledger.db") }, nil},
		{"no directory", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope", "ledger.db") }, ErrNoDirectory},
		{"readable by others", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "ledger.db")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, ErrNotPrivate},
		{"not writable by its owner", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "ledger.db")
			if err := os.WriteFile(p, nil, 0o400); err != nil {
				t.Fatal(err)
			}
			return p
		}, ErrNotPrivate},
		{"directory not writable", func(t *testing.T, dir string) string {
			if os.Geteuid() == 0 {
				t.Skip("root writes anywhere")
			}
			sub := filepath.Join(dir, "ro")
			if err := os.Mkdir(sub, 0o500); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(sub, "ledger.db")
		}, ErrNotWritable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.setup(t, t.TempDir())
			err := CheckPath(p)
			if tt.err == nil {
				if err != nil {
					t.Fatalf("CheckPath: %v", err)
				}
				if _, serr := os.Stat(p); !errors.Is(serr, fs.ErrNotExist) {
					t.Errorf("CheckPath created %s", p)
				}
				return
			}
			var pe *fs.PathError
			if !errors.Is(err, tt.err) || !errors.As(err, &pe) {
				t.Fatalf("CheckPath: %v, want a path error wrapping %v", err, tt.err)
			}
		})
	}
}

func TestLedger_Probe(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	t.Run("healthy", func(t *testing.T) {
		for _, full := range []bool{false, true} {
			c := l.Probe(ctx, full)
			if c.Level != paysync.CheckOK || !strings.Contains(c.Detail, "schema version") || !strings.Contains(c.Detail, "mode 0600, writable") ||
				strings.Contains(c.Detail, "integrity ok") != full {
				t.Errorf("full %v: got %v %q (err %v)", full, c.Level, c.Detail, c.Err)
			}
		}
	})
	t.Run("empty backlog", func(t *testing.T) {
		b, err := l.Backlog(ctx)
		if err != nil || len(b.Failed) != 0 || b.Pending != 0 || b.Unsettled != 0 {
			t.Errorf("Backlog: %+v, %v", b, err)
		}
	})
	t.Run("readable by others", func(t *testing.T) {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(p, 0o600)
		c := l.Probe(ctx, false)
		if c.Level != paysync.CheckFail || !errors.Is(c.Err, ErrNotPrivate) || !strings.Contains(c.Detail, "mode 0644") {
			t.Errorf("got %v %q (err %v)", c.Level, c.Detail, c.Err)
		}
	})
	t.Run("locked by another writer", func(t *testing.T) {
		short, err := Open(ctx, p, Options{BusyTimeout: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer short.Close()
		tx, err := l.db.BeginTx(ctx, nil) // immediate: holds the write lock
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		c := short.Probe(ctx, false)
		if c.Level != paysync.CheckFail || !errors.Is(c.Err, ErrLocked) {
			t.Errorf("got %v %q (err %v), want locked", c.Level, c.Detail, c.Err)
		}
	})
}
