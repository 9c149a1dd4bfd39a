package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paysync/paysync"
)

// stmts prepares each statement once per transaction: a commit of many
// small sources runs the same few statements hundreds of times. With a
// cache (Ledger.stmts), a statement seen before was prepared once on the
// writer connection and is only bound to the transaction.
type stmts struct {
	ctx   context.Context
	tx    *sql.Tx
	m     map[string]*sql.Stmt
	cache *preparedCache
	// parent is the caller's context when ctx is detached from its
	// cancellation (Ledger.stmts): checked before each statement instead.
	parent context.Context
	// bulk, when set, holds intake's rows to insert many per statement.
	bulk *bulk
}

func newStmts(ctx context.Context, tx *sql.Tx) *stmts {
	return &stmts{ctx: ctx, tx: tx, m: map[string]*sql.Stmt{}}
}

// stmts is newStmts with the ledger's statement cache, for transactions
// of many short statements (intake, recording created pay parts). Their
// statements run without the caller's cancellation: with it, the SQLite
// driver starts a goroutine per statement to watch the context, 5 % of
// paysync's CPU under load. Cancellation is checked before each statement
// instead (a statement takes microseconds), and the transaction itself is
// still rolled back when ctx ends.
func (l *Ledger) stmts(ctx context.Context, tx *sql.Tx) *stmts {
	st := newStmts(context.WithoutCancel(ctx), tx)
	st.cache, st.parent = &l.prep, ctx
	return st
}

// cancelled is the caller's context error, if it ended.
func (s *stmts) cancelled() error {
	if s.parent == nil {
		return nil
	}
	return s.parent.Err()
}

func (s *stmts) get(q string) (*sql.Stmt, error) {
	if st, ok := s.m[q]; ok {
		return st, nil
	}
	var st *sql.Stmt
	if p := s.cache.lookup(q); p != nil {
		st = s.tx.StmtContext(s.ctx, p)
	} else {
		var err error
		if st, err = s.tx.PrepareContext(s.ctx, q); err != nil {
			return nil, err
		}
	}
	s.m[q] = st
	return st, nil
}

// preparedCache holds statements prepared on the writer connection, for
// the hot transactions (intake, recording created pay parts): parsing SQL
// was 7 % of paysync's CPU under load. A statement can only be prepared on
// the database while no transaction holds the writer, so a transaction
// notes what it missed (lookup) and the ledger prepares those after the
// commit (learn).
type preparedCache struct {
	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want []string
	done bool // closed with the ledger
}

// maxPrepared bounds the cache: queries built per call (IN lists of any
// length) would otherwise fill it.
const maxPrepared = 64

func (c *preparedCache) lookup(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	if st, ok := c.m[q]; ok {
		return st
	}
	if len(c.m)+len(c.want) < maxPrepared && !slices.Contains(c.want, q) {
		c.want = append(c.want, q)
	}
	return nil
}

// learn prepares the statements transactions missed. A failure only means
// the statement is prepared per transaction again.
func (c *preparedCache) learn(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	want := c.want
	c.want = nil
	c.mu.Unlock()
	for _, q := range want {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if _, dup := c.m[q]; dup || c.done {
			st.Close()
		} else {
			if c.m == nil {
				c.m = map[string]*sql.Stmt{}
			}
			c.m[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *preparedCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m, c.want, c.done = nil, nil, true
}

func (s *stmts) exec(q string, args ...any) (sql.Result, error) {
	if err := s.cancelled(); err != nil {
		return nil, err
	}
	st, err := s.get(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(s.ctx, args...)
}

// queryRow returns the row of a prepared q; a prepare error surfaces at Scan.
func (s *stmts) queryRow(q string, args ...any) *sql.Row {
	if s.cancelled() != nil {
		// A row whose Scan returns the caller's context error.
		return s.tx.QueryRowContext(s.parent, q, args...)
	}
	st, err := s.get(q)
	if err != nil {
		return s.tx.QueryRowContext(s.ctx, q, args...)
	}
	return st.QueryRowContext(s.ctx, args...)
}

// query runs a prepared q.
func (s *stmts) query(q string, args ...any) (*sql.Rows, error) {
	if err := s.cancelled(); err != nil {
		return nil, err
	}
	st, err := s.get(q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(s.ctx, args...)
}

// QueryRowContext is queryRow (ctx is its own).
func (s *stmts) QueryRowContext(_ context.Context, q string, args ...any) *sql.Row {
	return s.queryRow(q, args...)
}

// QueryContext makes stmts a querier (ctx is its own).
func (s *stmts) QueryContext(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.query(q, args...)
}

func (s *stmts) close() {
	for _, st := range s.m {
		st.Close()
	}
}

// accumulator collects the accumulating pay parts of many intents, per
// company in order, to add them to the open batches in one go.
type accumulator struct {
	order []string
	by    map[string]*accPart
}

type accPart struct {
	source int64  // the first contributing source opens a new batch
	opened string // created_at of a batch it opens: its first entry's arrival
	size   int
	pps    []paysync.PlannedPayPart
	ids    map[string]int64 // entry id → row id
}

func (a *accumulator) add(company string, source int64, opened string, size int, pps []paysync.PlannedPayPart, ids map[string]int64) {
	if a.by == nil {
		a.by = map[string]*accPart{}
	}
	p := a.by[company]
	if p == nil {
		p = &accPart{source: source, opened: opened, size: size, ids: map[string]int64{}}
		a.by[company] = p
		a.order = append(a.order, company)
	}
	p.opened = min(p.opened, opened)
	p.pps = append(p.pps, pps...)
	for _, pp := range pps {
		for _, r := range pp.Entries {
			if id, ok := ids[r.ID]; ok {
				p.ids[r.ID] = id
			}
		}
	}
}

// CommitImports commits many small intents (one per NATS message), as
// few transactions as it can: each intent in a savepoint, so that one
// refused intent (a duplicate source, an entry already paid) is rolled
// back alone and reported in errs at its index, while the others commit.
// Their accumulating pay parts go to each company's open batches together.
//
// Intake yields the writer to delivery: when a delivery transaction is
// waiting (recording created pay parts, starting an attempt), the intents
// so far are committed and the rest follow in a new transaction, so that
// the sender waits for a few intents (one, or a statement's worth of
// rows: see bulk), not a whole group. If a later
// transaction fails, its intents and the ones after it get that error in
// errs (retry them); a non-nil error means nothing was committed.
func (l *Ledger) CommitImports(ctx context.Context, ins []ImportIntent) (out []Committed, errs []error, err error) {
	out, errs = make([]Committed, len(ins)), make([]error, len(ins))
	for start := 0; start < len(ins); {
		// Refusals are rare (the caller looked the sources and entries
		// up): first without savepoints, which cost two statements each.
		n, err := l.commitImports(ctx, ins[start:], out[start:], errs[start:], false)
		if errors.Is(err, errRefused) {
			n, err = l.commitImports(ctx, ins[start:], out[start:], errs[start:], true)
		}
		switch {
		case err != nil && start == 0:
			return nil, nil, err
		case err != nil:
			for i := start; i < len(ins); i++ {
				out[i], errs[i] = Committed{}, err
			}
			return out, errs, nil
		}
		start += n
	}
	return out, errs, nil
}

// allAccumulate reports whether every intent joins open batches: only
// then are its rows held for bulk (an intent with batches of its own
// inserts them at once, and they refer to its source; a correction refers
// to its entry's row, which may be one of the group's).
func allAccumulate(ins []ImportIntent) bool {
	for _, in := range ins {
		if !in.Accumulate || len(in.Corrections) > 0 {
			return false
		}
	}
	return true
}

// errRefused rolls back an attempt without savepoints when one intent fails.
var errRefused = errors.New("an intent was refused")

// commitImports commits intents from the first on in one transaction, until
// a delivery transaction waits for the writer (at least one intent each
// time), and returns how many it took.
func (l *Ledger) commitImports(ctx context.Context, ins []ImportIntent, out []Committed, errs []error, savepoints bool) (n int, err error) {
	err = l.txYielding(ctx, "commit imports", func(tx *sql.Tx) error {
		st := l.stmts(ctx, tx)
		defer st.close()
		now := l.ts()
		var acc accumulator
		if !savepoints && allAccumulate(ins) {
			st.bulk = &bulk{}
		}
		for n = 0; n < len(ins) && (n == 0 || !l.deliveryWaits()); n++ {
			in := ins[n]
			out[n], errs[n] = Committed{}, nil
			in.opened = l.openedAt(in.Received)
			if savepoints {
				if _, err := st.exec(`SAVEPOINT intent`); err != nil {
					return err
				}
			}
			var one accumulator
			c, ierr := commitIntent(st, in, now, &one)
			switch {
			case ierr != nil && !savepoints:
				return errRefused
			case ierr != nil:
				if _, err := st.exec(`ROLLBACK TO intent`); err != nil {
					return err
				}
				errs[n] = ierr
			default:
				out[n] = c
				for _, company := range one.order {
					p := one.by[company]
					acc.add(company, p.source, p.opened, p.size, p.pps, p.ids)
				}
			}
			if savepoints {
				if _, err := st.exec(`RELEASE intent`); err != nil {
					return err
				}
			}
			// Held rows are written a statement's worth at a time, so
			// that the check above weighs written work: a delivery
			// transaction waits for at most that many messages' rows
			// (and the pay parts of those taken), not a whole group's.
			if st.bulk != nil && (n+1)%maxBulkRows == 0 {
				if err := st.bulk.flush(st, "sources", "entries", "rejects"); err != nil {
					return err
				}
			}
		}
		if st.bulk != nil {
			// The batches the pay parts join refer to their sources.
			if err := st.bulk.flush(st, "sources", "entries", "rejects"); err != nil {
				return err
			}
		}
		for _, company := range acc.order {
			p := acc.by[company]
			if _, err := accumulateStmts(st, company, p.source, p.pps, p.size, p.ids, now, p.opened); err != nil {
				return fmt.Errorf("company %s: %w", company, err)
			}
		}
		if st.bulk != nil {
			return st.bulk.flush(st, "pay_parts", "pay_part_entries")
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SourcesByHash returns the committed sources among content hashes.
func (l *Ledger) SourcesByHash(ctx context.Context, hashes []string) (map[string]Source, error) {
	out := map[string]Source{}
	err := queryIn(ctx, l.rdb, hashes, func(in string) string {
		return `SELECT ` + sourceCols + ` FROM sources WHERE content_hash IN (` + in + `) AND ` + committedSource
	}, func(rows *sql.Rows) error {
		s, err := scanSource(rows)
		if err == nil {
			out[s.Hash] = s
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: find sources: %w", err)
	}
	return out, nil
}

// Lingering returns, per company with an open (unsealed) batch, when its
// oldest one was opened: the sender seals each exactly when it has
// lingered, and uses the wait to get ready for the company.
func (l *Ledger) Lingering(ctx context.Context) (map[string]time.Time, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT company_id, min(created_at) FROM batches WHERE sealed = 0 AND state = 'pending' GROUP BY company_id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: open batches: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var c, at string
		if err := rows.Scan(&c, &at); err != nil {
			return nil, fmt.Errorf("ledger: open batches: %w", err)
		}
		out[c] = parseTS(at)
	}
	return out, rows.Err()
}

// MaxLingerBack bounds how far back a batch's linger may start (see
// ImportIntent.Received). A message that waited in the stream longer than
// that is part of a backlog: its batch starts lingering now, so that it
// fills up rather than being sent part-full at once. A server clock ahead
// of ours starts it now too.
const MaxLingerBack = 100 * time.Millisecond

// openedAt is the created_at of a batch whose first entry was received.
func (l *Ledger) openedAt(received time.Time) string {
	now := l.now()
	if received.IsZero() || received.After(now) || now.Sub(received) > MaxLingerBack {
		received = now
	}
	return received.UTC().Format(tsLayout)
}

// SealedPendingAfter lists the ids of a company's sealed, pending batches
// with an id above after, oldest first, at most limit: what the sender
// takes next for the company without a new look at everything.
func (l *Ledger) SealedPendingAfter(ctx context.Context, company string, after int64, limit int) ([]int64, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT id FROM `+openBatches+` WHERE `+openWhere+` AND state = 'pending' AND company_id = ? AND id > ? ORDER BY id LIMIT ?`, company, after, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: pending batches of %s: %w", company, err)
	}
	return scanIDs(rows, "pending batches of "+company)
}

// openWhere selects the sealed batches still to send; its terms are those
// of the batches_open index, so that SQLite uses it.
const openWhere = `state IN ('pending', 'sending', 'failed') AND sealed = 1`

// openBatches names the index outright: without statistics SQLite may pick
// batches_state, which reads every open batch; with INDEXED BY a query
// the index cannot serve is an error, not a slow plan.
const openBatches = `batches INDEXED BY batches_open`

// OpenHeads returns, per company with sealed batches still to send
// (pending, sending or failed), its oldest one's id: where the sending
// loop starts a company's worker. One index seek per company, whatever
// the backlog.
func (l *Ledger) OpenHeads(ctx context.Context) (map[string]int64, error) {
	rows, err := l.rdb.QueryContext(ctx, `WITH RECURSIVE c(company) AS (
			SELECT min(company_id) FROM `+openBatches+` WHERE `+openWhere+`
			UNION ALL
			SELECT (SELECT min(company_id) FROM `+openBatches+` WHERE `+openWhere+` AND company_id > c.company) FROM c WHERE c.company IS NOT NULL)
		SELECT company, (SELECT min(id) FROM `+openBatches+` WHERE `+openWhere+` AND company_id = c.company) FROM c WHERE company IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("ledger: open batches: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var c string
		var id int64
		if err := rows.Scan(&c, &id); err != nil {
			return nil, fmt.Errorf("ledger: open batches: %w", err)
		}
		out[c] = id
	}
	return out, rows.Err()
}

// OpenAfter lists the ids of a company's sealed batches still to send
// (pending, sending or failed) from id from on, oldest first, at most
// limit: what the company's worker sends next, in order.
func (l *Ledger) OpenAfter(ctx context.Context, company string, from int64, limit int) ([]int64, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT id FROM `+openBatches+` WHERE `+openWhere+` AND company_id = ? AND id >= ? ORDER BY id LIMIT ?`, company, from, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: open batches of %s: %w", company, err)
	}
	return scanIDs(rows, "open batches of "+company)
}

// scanIDs reads and closes rows of one id each.
func scanIDs(rows *sql.Rows, what string) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("ledger: %s: %w", what, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %s: %w", what, err)
	}
	return out, nil
}

// SealDueAny reports whether an open batch has lingered at least linger
// (0: whether there is any open batch): a read, so that the sending loop
// takes the writer to seal only when there is something to seal.
func (l *Ledger) SealDueAny(ctx context.Context, linger time.Duration) (bool, error) {
	cutoff := l.now().Add(-linger).UTC().Format(tsLayout)
	var n int
	if err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM batches WHERE sealed = 0 AND created_at <= ? LIMIT 1)`, cutoff).Scan(&n); err != nil {
		return false, fmt.Errorf("ledger: open batches: %w", err)
	}
	return n > 0, nil
}

// bulk holds the rows of a group of intents (CommitImports' first
// attempt) and inserts them many rows per statement: a message is four
// rows (source, entry, pay part, link), and one statement per row cost
// more than the rows themselves. Each row's id is assigned when it is
// added (SQLite's own rule for a table without AUTOINCREMENT: one above
// the largest), so that the rows that refer to it can be added at once.
// Any refusal (a source or entry id already stored) surfaces at flush as
// errRefused, and the group is committed again intent by intent.
type bulk struct {
	next map[string]int64 // table → the next id
	rows map[string][][]any
}

// bulkTables are the tables bulk inserts into: their insert statement
// (without VALUES), in the order they are flushed (each refers only to
// those before it, or to rows already stored).
var bulkTables = map[string]string{
	"sources":          `INSERT INTO sources (id, kind, name, content_hash, format, size, payload, status, entries, duplicates, rejects, received_at)`,
	"entries":          `INSERT INTO entries (id, ` + entryCols + `)`,
	"rejects":          `INSERT INTO rejects (source_id, entry_id, line, field, message, hint, created_at)`,
	"pay_parts":        `INSERT INTO pay_parts (id, ` + payPartCols + `)`,
	"pay_part_entries": `INSERT OR IGNORE INTO pay_part_entries (pay_part_id, entry_id)`,
}

// id assigns the next id of table.
func (b *bulk) id(st *stmts, table string) (int64, error) {
	if b.next == nil {
		b.next = map[string]int64{}
	}
	n, ok := b.next[table]
	if !ok {
		if err := st.queryRow(`SELECT coalesce(max(id), 0) + 1 FROM ` + table).Scan(&n); err != nil {
			return 0, err
		}
	}
	b.next[table] = n + 1
	return n, nil
}

func (b *bulk) add(table string, row ...any) {
	if b.rows == nil {
		b.rows = map[string][][]any{}
	}
	b.rows[table] = append(b.rows[table], row)
}

// maxBulkRows bounds the rows of one statement (its parameters stay far
// below SQLite's limit). Fewer go in statements of 16, 8, … 1 rows, so
// that only a few statement texts exist (each prepared once).
const maxBulkRows = 32

// flush inserts the held rows of tables, in order. A constraint failure
// is errRefused.
func (b *bulk) flush(st *stmts, tables ...string) error {
	for _, t := range tables {
		rows := b.rows[t]
		delete(b.rows, t)
		for len(rows) > 0 {
			n := maxBulkRows
			for n > len(rows) {
				n /= 2
			}
			one := "(" + placeholders(len(rows[0])) + ")"
			q := bulkTables[t] + ` VALUES ` + strings.TrimSuffix(strings.Repeat(one+",", n), ",")
			args := make([]any, 0, n*len(rows[0]))
			for _, r := range rows[:n] {
				args = append(args, r...)
			}
			if _, err := st.exec(q, args...); err != nil {
				if isConstraint(err) {
					return errRefused
				}
				return fmt.Errorf("insert into %s: %w", t, err)
			}
			rows = rows[n:]
		}
	}
	return nil
}
