package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

func TestLedger_OpenCreates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("ledger file: %v", err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode = %04o, want 0600", got)
	}
	if l.Path() != path {
		t.Errorf("Path() = %q, want %q", l.Path(), path)
	}
	if v, err := l.SchemaVersion(ctx); err != nil || v != latestVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, latestVersion)
	}
	var mode string
	if err := l.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk int
	if err := l.db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
	_, err = l.db.ExecContext(ctx, `INSERT INTO pay_parts (batch_id, seq, company_id, employee_id, code, state, updated_at)
		VALUES (4242, 0, 'A', 'e1', 'T1', 'pending', '2025-01-01T00:00:00Z')`)
	if err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Errorf("insert of a pay part with an unknown batch: err = %v, want a FOREIGN KEY failure", err)
	}
	var n int
	if err := l.db.QueryRowContext(ctx, "SELECT count(*) FROM pay_parts").Scan(&n); err != nil || n != 0 {
		t.Errorf("pay_parts = %d, %v; want 0", n, err)
	}
	// No write-check file is left behind.
	des, _ := os.ReadDir(filepath.Dir(path))
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".paysync-write-check") {
			t.Errorf("left behind: %s", de.Name())
		}
	}
}

func TestLedger_OpenReopenIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	for i := range 3 {
		l, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		if v, err := l.SchemaVersion(ctx); err != nil || v != latestVersion {
			t.Errorf("Open #%d: SchemaVersion = %d, %v; want %d", i+1, v, err, latestVersion)
		}
		var mode string
		if err := l.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("Open #%d: journal_mode = %q, %v; want wal", i+1, mode, err)
		}
		if i == 0 {
			if err := l.SaveCredentials(ctx, "default", "rt-1", "seed-1", "", time.Time{}, time.Time{}); err != nil {
				t.Fatal(err)
			}
			commit(t, l, ImportIntent{
				Source:   src("a.csv", "payload"),
				Entries:  []NewEntry{newEntry(t, ent("a.csv", 1, "e1", "7.5"), paysync.EntryMapped)},
				PayParts: nil,
			})
		} else {
			rt, seed, _, err := l.Credentials(ctx, "default")
			if err != nil || rt != "rt-1" || seed != "seed-1" {
				t.Errorf("Open #%d: Credentials = %q, %q, %v; want the saved ones", i+1, rt, seed, err)
			}
			if _, ok, err := l.SourceByHash(ctx, paysync.PayloadHash([]byte("payload"))); err != nil || !ok {
				t.Errorf("Open #%d: source lost: %v %v", i+1, ok, err)
			}
		}
		var tables int
		if err := l.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!'").Scan(&tables); err != nil || tables != 22 {
			t.Errorf("Open #%d: %d tables, %v; want 22 (source_chunks since migration 5; entry_corrections, corrections, entry_versions, closed_periods since 7; audit_log since 8; connections, connection_companies since 9; versions, groups, lines, exclusions since 13)", i+1, tables, err)
		}
		// Migration 13's source 0, which the reconciler's units name when
		// no import caused them, is there once however often it opens.
		var sentinels int
		if err := l.db.QueryRowContext(ctx, "SELECT count(*) FROM sources WHERE id = 0 AND name = 'reconcile' AND kind = 'replay' AND status = 'committed'").Scan(&sentinels); err != nil || sentinels != 1 {
			t.Errorf("Open #%d: %d reconcile sources (id 0), %v; want 1", i+1, sentinels, err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after reopening: %v, %v; want mode 0600", fi.Mode(), err)
	}
}

// makeLedger creates a ledger at path and closes it.
func makeLedger(t *testing.T, path string) {
	t.Helper()
	l, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := l.SaveCredentials(t.Context(), "default", "rt", "seed", "", time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLedger_OpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup prepares dir and returns the path to open and, if the
		// setup holds something open, a function that must run first
		// after Open returns.
		setup   func(t *testing.T, dir string) string
		opts    Options
		is      error    // errors.Is target, nil for none
		msg     []string // substrings of the message
		noFile  bool     // path must not exist afterwards
		maxTime time.Duration
	}{
		{
			name: "corrupt file",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "ledger.db")
				garbage := make([]byte, 4096)
				r := rand.New(rand.NewPCG(1, 2))
				for i := range garbage {
					garbage[i] = byte(r.Uint32())
				}
				if err := os.WriteFile(path, garbage, 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			},
			is:  ErrCorrupt,
			msg: []string{"ledger.db", "backup"},
		},
		{
			name: "other sqlite database",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "other.db")
				db := rawDB(t, path)
				mustExec(t, db, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
				mustExec(t, db, "INSERT INTO customers (name) VALUES ('x')")
				db.Close()
				if err := os.Chmod(path, 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			},
			is:  ErrCorrupt,
			msg: []string{"other.db", "other tables"},
		},
		{
			name: "newer schema",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "ledger.db")
				makeLedger(t, path)
				db := rawDB(t, path)
				mustExec(t, db, "PRAGMA user_version = 99")
				db.Close()
				return path
			},
			is:  ErrNewerSchema,
			msg: []string{"upgrade paysync", "99"},
		},
		{
			name: "schema version without tables",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "ledger.db")
				db := rawDB(t, path)
				mustExec(t, db, "CREATE TABLE t (x)")
				mustExec(t, db, "PRAGMA user_version = 1")
				db.Close()
				if err := os.Chmod(path, 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			},
			is:  ErrCorrupt,
			msg: []string{"no paysync tables"},
		},
		{
			name: "readable by others",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "ledger.db")
				makeLedger(t, path)
				if err := os.Chmod(path, 0o644); err != nil {
					t.Fatal(err)
				}
				return path
			},
			msg: []string{"readable by others", "chmod 600", "0644"},
		},
		{
			name: "readable by the group",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "ledger.db")
				makeLedger(t, path)
				if err := os.Chmod(path, 0o640); err != nil {
					t.Fatal(err)
				}
				return path
			},
			msg: []string{"chmod 600", "0640"},
		},
		{
			name: "path is a directory",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "ledger.db")
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
				return path
			},
			msg: []string{"is a directory"},
		},
		{
			name: "missing directory",
			setup: func(t *testing.T, dir string) string {
				return filepath.Join(dir, "nope", "ledger.db")
			},
			msg:    []string{filepath.Join("nope"), "does not exist"},
			noFile: true,
		},
		{
			name:  "empty path",
			setup: func(t *testing.T, dir string) string { return "" },
			msg:   []string{"no path"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tt.setup(t, dir)
			before := dirState(t, dir)
			start := time.Now()
			l, err := Open(t.Context(), path, tt.opts)
			if err == nil {
				l.Close()
				t.Fatalf("Open succeeded, want an error")
			}
			t.Logf("error: %v", err)
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(err, %v) = false", tt.is)
			}
			for _, s := range tt.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not mention %q", err, s)
				}
			}
			if after := dirState(t, dir); after != before {
				t.Errorf("directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if tt.noFile && path != "" {
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s exists after a failed Open (%v)", path, err)
				}
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("Open took %v", d)
			}
		})
	}
}

// TestLedger_OpenUnwritableDirectory uses procfs: root ignores permission
// bits, but nobody can create a file in /proc/self.
func TestLedger_OpenUnwritableDirectory(t *testing.T) {
	t.Parallel()
	dir := "/proc/self"
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Skip("no procfs")
	}
	path := filepath.Join(dir, "ledger.db")
	l, err := Open(t.Context(), path, Options{})
	if err == nil {
		l.Close()
		t.Fatal("Open succeeded in /proc/self")
	}
	t.Logf("error: %v", err)
	for _, s := range []string{"directory", "/proc/self", "not writable"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q does not mention %q", err, s)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after a failed Open (%v)", path, err)
	}
}

// TestLedger_OpenLocked holds the ledger from a second connection, as
// another paysync would, and expects Open to give up with ErrLocked after
// its busy timeout, changing nothing.
func TestLedger_OpenLocked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lock []string // statements the other connection runs and holds
	}{
		{
			name: "exclusive locking mode",
			lock: []string{"PRAGMA locking_mode = EXCLUSIVE", "BEGIN EXCLUSIVE", "INSERT INTO credentials (name, refresh_token, seed, updated_at) VALUES ('x', 'y', 'z', 't')"},
		},
		{
			name: "write transaction",
			lock: []string{"BEGIN EXCLUSIVE", "INSERT INTO credentials (name, refresh_token, seed, updated_at) VALUES ('x', 'y', 'z', 't')"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "ledger.db")
			makeLedger(t, path)

			other := rawDB(t, path)
			conn, err := other.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for _, q := range tt.lock {
				if _, err := conn.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			defer conn.ExecContext(context.Background(), "ROLLBACK")

			before := dirState(t, filepath.Dir(path))
			start := time.Now()
			l2, err := Open(ctx, path, Options{BusyTimeout: 200 * time.Millisecond})
			took := time.Since(start)
			if err == nil {
				werr := l2.SaveCredentials(ctx, "default", "a", "b", "", time.Time{}, time.Time{})
				l2.Close()
				t.Fatalf("Open succeeded while another connection holds the ledger (first write: %v)", werr)
			}
			t.Logf("error after %v: %v", took, err)
			if !errors.Is(err, ErrLocked) {
				t.Errorf("errors.Is(err, ErrLocked) = false")
			}
			if !strings.Contains(err.Error(), "another paysync") {
				t.Errorf("message %q does not say another paysync may be running", err)
			}
			if took < 150*time.Millisecond || took > time.Second {
				t.Errorf("Open took %v with a busy timeout of 200ms", took)
			}
			if after := dirState(t, filepath.Dir(path)); after != before {
				t.Errorf("directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestLedger_OpenPathSpecialChars: the path goes into a file: URI, where
// '?', '#' and '%' mean something; the ledger must still be the file named.
func TestLedger_OpenPathSpecialChars(t *testing.T) {
	for _, name := range []string{"pay#1", "pay?x=1", "pay%41", "pay ledger", "relative"} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, name)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "ledger.db")
			if name == "relative" {
				t.Chdir(parent)
				path = filepath.Join(name, "ledger.db")
			}
			for i := range 2 {
				l, err := Open(t.Context(), path, Options{})
				if err != nil {
					t.Fatalf("Open #%d: %v", i+1, err)
				}
				if i == 0 {
					if err := l.SaveCredentials(t.Context(), "default", "rt", "seed", "", time.Time{}, time.Time{}); err != nil {
						t.Fatal(err)
					}
				} else if rt, _, _, err := l.Credentials(t.Context(), "default"); err != nil || rt != "rt" {
					t.Errorf("Open #2: Credentials = %q, %v", rt, err)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// Only the named file exists, and it is a ledger.
			des, err := os.ReadDir(parent)
			if err != nil || len(des) != 1 || des[0].Name() != name {
				t.Errorf("%s holds %v (%v), want only %s", parent, des, err, name)
			}
			// The header holds the user version at offset 60 (big-endian).
			hdr, err := os.ReadFile(filepath.Join(dir, "ledger.db"))
			if err != nil || len(hdr) < 100 || string(hdr[:16]) != "SQLite format 3\x00" {
				t.Fatalf("%s is not an SQLite database (%v)", path, err)
			}
			if v := binary.BigEndian.Uint32(hdr[60:64]); v != latestVersion {
				t.Errorf("user_version of %s = %d, want %d", path, v, latestVersion)
			}
		})
	}
}

// TestLedger_OpenFailsLeavingNothing: when Open creates the file and then
// fails (here: the context is already cancelled), no file is left behind.
func TestLedger_OpenFailsLeavingNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	l, err := Open(ctx, path, Options{})
	if err == nil {
		l.Close()
		t.Fatal("Open with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, serr := os.Stat(path); serr == nil {
		t.Fatalf("BUG (ledger.go Open): the file Open created stays behind after a failed migrate (%v); "+
			"remove it when Open created it and fails", err)
	}
}

// latestVersion is the schema version of the newest migration.
const latestVersion = 13 // 0008 the console's audit log, 0009 payroll connections, 0010 imports taken again, 0011 why a correction waits, 0012 held entries in id order, 0013 the desired state

// TestLedger_OpenSameNewLedgerAtOnce: processes that open the same new
// ledger at the same moment (a daemon starting while an operator runs
// `paysync batches`) all succeed: none mistakes the other's migration in
// progress for a foreign database ("it holds other tables").
func TestLedger_OpenSameNewLedgerAtOnce(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("l%d.db", round))
		const n = 4
		errs := make(chan error, n)
		var start sync.WaitGroup
		start.Add(1)
		for range n {
			go func() {
				start.Wait()
				l, err := Open(context.Background(), path, Options{})
				if err == nil {
					err = l.Close()
				}
				errs <- err
			}()
		}
		start.Done()
		for range n {
			if err := <-errs; err != nil && !errors.Is(err, ErrLocked) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
