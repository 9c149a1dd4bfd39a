package ledger

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Errors callers branch on. The messages say what to do.
var (
	ErrNewerSchema = errors.New("ledger was written by a newer paysync")
	ErrLocked      = errors.New("ledger is locked by another process")
	ErrCorrupt     = errors.New("ledger is not a paysync ledger or is damaged")
	ErrNotFound    = errors.New("not found")
)

// Options tune Open.
type Options struct {
	BusyTimeout time.Duration    // how long to wait for another writer (default 5s)
	Now         func() time.Time // clock (default time.Now)
}

// Ledger is the SQLite audit trail and state store. One writer connection;
// every change is one short transaction, never held across a network call.
type Ledger struct {
	db   *sql.DB // the one writer connection (and TEMP tables)
	rdb  *sql.DB // readers: WAL lets them read while the writer commits
	path string
	now  func() time.Time
	prep preparedCache
	// waiting counts transactions other than intake's that wait for or
	// hold the writer (see deliveryWaits).
	waiting atomic.Int32
}

// readers is the size of the read pool: delivery's reads (a batch, its
// items, what lingers) run beside intake's write transactions instead of
// queueing behind them for the writer connection.
const readers = 2

// Open opens (creating if needed) the ledger at path and migrates it. On
// any error nothing has been changed.
func Open(ctx context.Context, path string, opts Options) (*Ledger, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if path == "" {
		return nil, errors.New("ledger: no path")
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("ledger: directory %s does not exist", dir)
	}
	created := false
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := checkWritableDir(dir); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		switch {
		case errors.Is(err, fs.ErrExist):
			// Another process created it a moment ago: open it as it is.
		case err != nil:
			return nil, fmt.Errorf("ledger: create %s: %w", path, err)
		default:
			f.Close()
			created = true
		}
	case err != nil:
		return nil, fmt.Errorf("ledger: %w", err)
	case fi.IsDir():
		return nil, fmt.Errorf("ledger: %s is a directory", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("ledger: %s is readable by others (mode %04o); it holds payroll credentials: run chmod 600 %s", path, fi.Mode().Perm(), path)
	default:
		if err := checkWritableDir(dir); err != nil {
			return nil, err
		}
	}
	file := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_txlock=immediate",
		file, opts.BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	l := &Ledger{db: db, path: path, now: opts.Now}
	if err := l.migrate(ctx); err != nil {
		db.Close()
		if created { // nothing changed: not even an empty file left behind
			os.Remove(path)
			os.Remove(path + "-wal")
			os.Remove(path + "-shm")
		}
		return nil, err
	}
	// Opened after migrating: the file is a WAL ledger by now. query_only
	// makes a write through a reader an error instead of a second writer.
	rdb, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=query_only(1)", file, opts.BusyTimeout.Milliseconds()))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger: open %s for reading: %w", path, err)
	}
	rdb.SetMaxOpenConns(readers)
	rdb.SetMaxIdleConns(readers)
	l.rdb = rdb
	return l, nil
}

// checkWritableDir makes sure SQLite can create its journal files beside
// the ledger: it needs a writable directory, not just a writable file.
func checkWritableDir(dir string) error {
	f, err := os.CreateTemp(dir, ".paysync-write-check-*")
	if err != nil {
		return fmt.Errorf("ledger: directory %s is not writable (SQLite keeps its journal beside the ledger): %w", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Close closes the database.
func (l *Ledger) Close() error {
	l.prep.close()
	var rerr error
	if l.rdb != nil {
		rerr = l.rdb.Close()
	}
	return errors.Join(l.db.Close(), rerr)
}

// Path returns the ledger file.
func (l *Ledger) Path() string { return l.path }

// classifyOpen turns SQLite failures during open into the package errors.
func (l *Ledger) classifyOpen(op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("ledger %s: %w: another paysync may be running on it (%s)", l.path, ErrLocked, op)
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("ledger %s: %w: restore it from a backup, or move it away to start a new one", l.path, ErrCorrupt)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
			return fmt.Errorf("ledger %s: cannot write: %v", l.path, err)
		}
	}
	return fmt.Errorf("ledger %s: %s: %w", l.path, op, err)
}

// migrate applies the embedded migrations in order, each in a transaction
// that also sets PRAGMA user_version.
func (l *Ledger) migrate(ctx context.Context) error {
	// The schema version and the tables are read together under the write
	// lock (the connection begins immediate transactions): another process
	// migrating the same new ledger at this moment is either done (its
	// version and tables are seen) or not yet begun (neither is). Taking
	// the lock also reports a ledger in use by another writer now.
	var v, tables, batches int
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return l.classifyOpen("lock", err)
	}
	err = tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	if err == nil {
		err = tx.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE name = 'batches') FROM sqlite_master").Scan(&tables, &batches)
	}
	tx.Rollback()
	if err != nil {
		return l.classifyOpen("read schema", err)
	}
	// A readable header is not enough: make sure the pages are sane.
	var check string
	if err := l.db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&check); err != nil {
		return l.classifyOpen("check", err)
	} else if check != "ok" {
		return fmt.Errorf("ledger %s: %w: %s; restore it from a backup", l.path, ErrCorrupt, check)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	if v > len(names) {
		return fmt.Errorf("ledger %s: %w (schema version %d, this paysync knows up to %d): upgrade paysync; never downgrade a ledger", l.path, ErrNewerSchema, v, len(names))
	}
	switch {
	case v > 0 && batches == 0:
		return fmt.Errorf("ledger %s: %w: schema version %d but no paysync tables", l.path, ErrCorrupt, v)
	case v == 0 && tables > 0:
		return fmt.Errorf("ledger %s: %w: it holds other tables", l.path, ErrCorrupt)
	case v == 0:
		// WAL: readers never block the writer. Set once; it is persistent.
		// Another process opening the same new ledger at this moment may be
		// switching it too (SQLite then reports busy or an I/O error on
		// the files it is changing): look again shortly.
		var err error
		for try := 0; try < 20; try++ {
			if _, err = l.db.ExecContext(ctx, "PRAGMA journal_mode=WAL"); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(25 * time.Millisecond):
			}
		}
		if err != nil {
			return l.classifyOpen("enable WAL", err)
		}
	}
	for i := v; i < len(names); i++ {
		sqlText, err := migrations.ReadFile(names[i])
		if err != nil {
			return err
		}
		tx, err := l.db.BeginTx(ctx, nil)
		if err != nil {
			return l.classifyOpen("migrate", err)
		}
		var now int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&now); err != nil {
			tx.Rollback()
			return l.classifyOpen("migrate", err)
		}
		if now > i { // another process migrated meanwhile
			tx.Rollback()
			i = now - 1
			continue
		}
		if _, err := tx.ExecContext(ctx, string(sqlText)); err != nil {
			tx.Rollback()
			return l.classifyOpen("migrate "+strings.TrimPrefix(names[i], "migrations/"), err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return l.classifyOpen("migrate", err)
		}
		if err := tx.Commit(); err != nil {
			return l.classifyOpen("migrate", err)
		}
	}
	return nil
}

// SchemaVersion returns PRAGMA user_version.
func (l *Ledger) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := l.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

// tx runs fn in one immediate transaction. Every transaction but intake's
// counts as waiting for the writer until it is done: intake yields to it
// (deliveryWaits).
func (l *Ledger) tx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	return l.txYielding(ctx, op, fn)
}

// deliveryWaits reports whether a transaction other than intake's wants
// the writer: intake (CommitImports) then commits what it has so far, so
// that the sender's bookkeeping between two calls never waits for a whole
// group of messages.
func (l *Ledger) deliveryWaits() bool { return l.waiting.Load() > 0 }

// txYielding is tx for intake, which does not count as waiting.
func (l *Ledger) txYielding(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return l.classifyOpen(op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return fmt.Errorf("ledger: %s: %w", op, err)
	}
	if err := tx.Commit(); err != nil {
		return l.classifyOpen(op, err)
	}
	l.prep.learn(ctx, l.db)
	return nil
}

// tsLayout has a fixed width, so that stored times sort as text.
const tsLayout = "2006-01-02T15:04:05.000000000Z07:00"

func (l *Ledger) ts() string { return l.now().UTC().Format(tsLayout) }

func parseTS(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// CopyTo writes a consistent copy of the ledger to path (a new file, mode
// 0600): a dry run imports into it what a real run would, and throws it
// away.
func (l *Ledger) CopyTo(ctx context.Context, path string) error {
	if _, err := l.db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return fmt.Errorf("ledger: copy: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("ledger: copy: %w", err)
	}
	return nil
}
