package ledger

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paysync/paysync"
)

// StreamImport describes an import staged as it is read (BeginImport).
type StreamImport struct {
	Kind      paysync.SourceKind // file, stdin, nats
	Name      string             // the source's name
	BatchSize int                // pay parts per batch (default 100)
	// Accumulate adds the pay parts to each company's open batch (created
	// unsealed when there is none with room) instead of new sealed
	// batches: streaming sources.
	Accumulate bool
	// Statement, when set, makes the import the complete statement of its
	// origin's entries for its periods (see Statement).
	Statement *Statement
}

// Statement is what a period statement removes: the entries of Origin
// dated in one of Periods that are paid and not in the import are
// removed, each by a tombstone correction the corrector applies. An
// import with any problem removes nothing (a row it could not read may
// be one of them).
type Statement struct {
	Origin  string
	Periods []paysync.Period
	// Companies the statement is of (its rows' companies): only entries
	// paid in one of them are removed, so that one company's export never
	// removes another's hours.
	Companies []string
}

// companiesJSON is Companies as a JSON array, for json_each.
func (st *Statement) companiesJSON() string {
	b, _ := json.Marshal(st.Companies)
	if st.Companies == nil {
		return "[]"
	}
	return string(b)
}

// SetStatement makes the import a period statement (see Statement); the
// periods may be known only once every row is read.
func (s *StagedImport) SetStatement(st *Statement) { s.in.Statement = st }

// Reject phases: rejects are stored in this order, each phase in the
// order its rejects were added.
const (
	PhaseRead  = iota // the reader's problems
	PhaseEntry        // problems of single entries: duplicates, mapping
	PhasePlan         // problems of pay parts: values the wire cannot carry
)

// chunkSize is the most input one stored payload chunk holds.
const chunkSize = 1 << 20

// commitCacheSize is SQLite's page cache while an import commits
// (negative: KiB), outside the Go heap.
const commitCacheSize = -32 << 10

// StagedImport is one import on its way into the ledger, in memory that
// does not grow with its size: its raw input, entries, links, pay parts
// and rejects are staged in TEMP tables of the ledger's connection, a
// chunk at a time (Flush, each a short transaction), and Commit moves them
// into the ledger in one transaction, or nothing when it fails. The
// staging is private to the connection and dropped at the end (or with
// the process), so nothing of an import is visible before Commit, and
// nothing is left after Rollback or a crash.
//
// No transaction is open between calls: the caller may call the payroll
// API (which may save a rotated token in the ledger) and other ledger
// methods meanwhile. Commit makes no network call. The staging lives on
// the ledger's one connection: should that be replaced (after a driver
// error), the next call fails and the import must be run again. A
// StagedImport is not safe for concurrent use.
type StagedImport struct {
	l    *Ledger
	ctx  context.Context
	in   StreamImport
	t    string // the TEMP tables' name prefix
	now  string
	done bool

	payload payloadWriter

	// Staged since the last Flush.
	seen    []string
	entries []stagedEntry
	links   [][2]int64 // entry seq, pay part index
	parts   []stagedPart
	dropped []int
	rejects []stagedReject
	// corrections: new versions of entries paid before (their staged
	// rows); nCorrections counts them all.
	corrections  []stagedEntry
	nCorrections int

	nEntries, nRejects, nParts, nDropped int
}

type stagedEntry struct {
	seq int64
	e   NewEntry
	js  []byte
}

type stagedPart struct {
	idx int
	pp  paysync.PlannedPayPart
}

type stagedReject struct {
	phase, seq int
	r          NewReject
}

var importSeq atomic.Int64

// BeginImport starts staging an import. Call Commit or Rollback.
func (l *Ledger) BeginImport(ctx context.Context, in StreamImport) (*StagedImport, error) {
	if in.BatchSize <= 0 {
		in.BatchSize = 100
	}
	s := &StagedImport{l: l, ctx: ctx, in: in, t: fmt.Sprintf("temp.import%d_", importSeq.Add(1)), now: l.ts()}
	s.payload.s = s
	for _, q := range []string{
		`CREATE TEMP TABLE %sseen (entry_id TEXT PRIMARY KEY) WITHOUT ROWID`,
		`CREATE TEMP TABLE %sentries (seq INTEGER PRIMARY KEY, entry_id TEXT NOT NULL, line INTEGER NOT NULL, content_hash TEXT NOT NULL,
			data BLOB NOT NULL, status TEXT NOT NULL, note TEXT NOT NULL, origin TEXT NOT NULL, entry_date TEXT NOT NULL)`,
		`CREATE TEMP TABLE %slinks (entry INTEGER NOT NULL, part INTEGER NOT NULL, PRIMARY KEY (entry, part)) WITHOUT ROWID`,
		`CREATE TEMP TABLE %sparts (idx INTEGER PRIMARY KEY, company_id TEXT NOT NULL, employee_id TEXT NOT NULL, employee_name TEXT NOT NULL,
			code TEXT NOT NULL, units TEXT, rate TEXT, amount TEXT, description TEXT NOT NULL, rule TEXT NOT NULL)`,
		`CREATE INDEX %sparts_company ON %[bare]parts (company_id, idx)`,
		`CREATE TEMP TABLE %sdropped (idx INTEGER PRIMARY KEY)`,
		`CREATE TEMP TABLE %srejects (phase INTEGER NOT NULL, seq INTEGER NOT NULL, entry_id TEXT NOT NULL, line INTEGER NOT NULL,
			field TEXT NOT NULL, message TEXT NOT NULL, hint TEXT NOT NULL, PRIMARY KEY (phase, seq))`,
		`CREATE TEMP TABLE %schunks (seq INTEGER PRIMARY KEY, data BLOB NOT NULL)`,
		`CREATE TEMP TABLE %scorrections (seq INTEGER PRIMARY KEY, entry_id TEXT NOT NULL, line INTEGER NOT NULL, content_hash TEXT NOT NULL, data BLOB NOT NULL)`,
		`CREATE TEMP TABLE %spay_parts (idx INTEGER PRIMARY KEY, pay_part INTEGER NOT NULL)`,
	} {
		if _, err := l.db.ExecContext(ctx, s.q(q)); err != nil {
			s.drop()
			return nil, fmt.Errorf("ledger: begin import: %w", err)
		}
	}
	return s, nil
}

// q fills the temporary tables' prefix into q: %s, and %[bare] without
// the schema.
func (s *StagedImport) q(q string) string {
	return strings.ReplaceAll(strings.ReplaceAll(q, "%[bare]", strings.TrimPrefix(s.t, "temp.")), "%s", s.t)
}

var stagedTables = []string{"seen", "entries", "links", "parts", "dropped", "rejects", "chunks", "corrections", "pay_parts"}

// drop removes the staging.
func (s *StagedImport) drop() {
	for _, name := range stagedTables {
		s.l.db.ExecContext(context.WithoutCancel(s.ctx), `DROP TABLE IF EXISTS `+s.t+name)
	}
}

// Write adds p to the source's raw input (io.Writer): it is counted and
// staged gzip'd in chunks. The caller hashes it (Commit).
func (s *StagedImport) Write(p []byte) (int, error) {
	if err := s.payload.write(p); err != nil {
		return 0, fmt.Errorf("ledger: stage input: %w", err)
	}
	return len(p), nil
}

// Lookup returns, among ids, the entries already in the ledger (as
// LookupEntries) and those seen before in this import (See).
func (s *StagedImport) Lookup(ids []string) (map[string]KnownEntry, map[string]bool, error) {
	if err := s.Flush(); err != nil {
		return nil, nil, err
	}
	known, err := s.l.LookupEntries(s.ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	err = queryIn(s.ctx, s.l.db, ids, func(in string) string {
		return `SELECT entry_id FROM ` + s.t + `seen WHERE entry_id IN (` + in + `)`
	}, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		seen[id] = true
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: import: %w", err)
	}
	return known, seen, nil
}

// See remembers that entry id was seen in this import (Lookup reports it).
func (s *StagedImport) See(id string) { s.seen = append(s.seen, id) }

// AddEntry stages an entry of the source and returns its number, for
// Link. data is the entry's JSON (as paysync.EntryHash returns it), nil to marshal
// it here.
func (s *StagedImport) AddEntry(e NewEntry, data []byte) (int64, error) {
	if data == nil {
		var err error
		if data, err = json.Marshal(e.Entry); err != nil {
			return 0, err
		}
	}
	s.nEntries++
	seq := int64(s.nEntries)
	s.entries = append(s.entries, stagedEntry{seq: seq, e: e, js: data})
	return seq, nil
}

// AddCorrection stages a new version of an entry paid before: committed
// with the import as a pending correction (the corrector applies it).
func (s *StagedImport) AddCorrection(e NewEntry, data []byte) {
	if data == nil {
		data, _ = json.Marshal(e.Entry)
	}
	s.nCorrections++
	s.corrections = append(s.corrections, stagedEntry{seq: int64(s.nCorrections), e: e, js: data})
}

// Link records that entry (a number from AddEntry) goes into the pay part
// with index part (AddPayPart, or DropPayPart).
func (s *StagedImport) Link(entry int64, part int) {
	s.links = append(s.links, [2]int64{entry, int64(part)})
}

// AddPayPart stages the pending pay part with index part (pay parts are
// numbered in order of first appearance; pp.Entries is ignored: its
// entries are those linked to it). Commit batches them per company in
// order of first appearance, in order of index, at most BatchSize each.
func (s *StagedImport) AddPayPart(part int, pp paysync.PlannedPayPart) {
	s.parts = append(s.parts, stagedPart{idx: part, pp: pp})
	s.nParts++
}

// DropPayPart records that the pay part with index part is not sent (it
// has a problem): an entry that only went into dropped pay parts is
// stored as rejected, so that a corrected source can bring it again.
func (s *StagedImport) DropPayPart(part int) {
	s.dropped = append(s.dropped, part)
	s.nDropped++
}

// AddReject stages a problem with the input. Rejects are stored by phase
// (PhaseRead, PhaseEntry, PhasePlan), each in the order added.
func (s *StagedImport) AddReject(phase int, r NewReject) {
	s.rejects = append(s.rejects, stagedReject{phase: phase, seq: s.nRejects, r: r})
	s.nRejects++
}

// Flush writes what was staged since the last Flush to the staging tables,
// in one short transaction.
func (s *StagedImport) Flush() error {
	if len(s.seen)+len(s.entries)+len(s.links)+len(s.parts)+len(s.dropped)+len(s.rejects)+len(s.corrections) == 0 {
		return nil
	}
	err := s.l.tx(s.ctx, "stage import", func(tx *sql.Tx) error {
		for _, b := range []struct {
			n   int
			q   string
			row func(i int) []any
		}{
			{len(s.seen), `INSERT OR IGNORE INTO %sseen (entry_id) VALUES (?)`, func(i int) []any { return []any{s.seen[i]} }},
			{len(s.entries), `INSERT INTO %sentries (seq, entry_id, line, content_hash, data, status, note, origin, entry_date) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, func(i int) []any {
				e := s.entries[i]
				return []any{e.seq, e.e.Entry.ID, e.e.Entry.Line, e.e.Hash, e.js, e.e.Status, e.e.Note, e.e.Origin, e.e.Entry.Date}
			}},
			{len(s.corrections), `INSERT INTO %scorrections (seq, entry_id, line, content_hash, data) VALUES (?, ?, ?, ?, ?)`, func(i int) []any {
				e := s.corrections[i]
				return []any{e.seq, e.e.Entry.ID, e.e.Entry.Line, e.e.Hash, e.js}
			}},
			{len(s.links), `INSERT OR IGNORE INTO %slinks (entry, part) VALUES (?, ?)`, func(i int) []any { return []any{s.links[i][0], s.links[i][1]} }},
			{len(s.parts), `INSERT INTO %sparts (idx, company_id, employee_id, employee_name, code, units, rate, amount, description, rule) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, func(i int) []any {
				p := s.parts[i]
				return []any{p.idx, p.pp.CompanyID, p.pp.EmployeeID, p.pp.EmployeeName, p.pp.Code, decText(p.pp.Units), decText(p.pp.Rate), decText(p.pp.Amount), p.pp.Description, p.pp.Rule}
			}},
			{len(s.dropped), `INSERT OR IGNORE INTO %sdropped (idx) VALUES (?)`, func(i int) []any { return []any{s.dropped[i]} }},
			{len(s.rejects), `INSERT INTO %srejects (phase, seq, entry_id, line, field, message, hint) VALUES (?, ?, ?, ?, ?, ?, ?)`, func(i int) []any {
				r := s.rejects[i]
				return []any{r.phase, r.seq, r.r.EntryID, r.r.Line, r.r.Field, r.r.Message, r.r.Hint}
			}},
		} {
			if b.n == 0 {
				continue
			}
			st, err := tx.PrepareContext(s.ctx, s.q(b.q))
			if err != nil {
				return err
			}
			for i := 0; i < b.n; i++ {
				if _, err := st.ExecContext(s.ctx, b.row(i)...); err != nil {
					st.Close()
					return err
				}
			}
			st.Close()
		}
		return nil
	})
	clear(s.entries) // the entries' data
	clear(s.corrections)
	s.corrections = s.corrections[:0]
	s.seen, s.entries, s.links, s.parts, s.dropped, s.rejects = s.seen[:0], s.entries[:0], s.links[:0], s.parts[:0], s.dropped[:0], s.rejects[:0]
	return err
}

// Commit moves the staged import into the ledger in one transaction: the
// source (with hash, the content hash of everything written, as intake
// computed it: paysync.PayloadHash, and its size) and its rejects,
// and unless rejected (all or nothing: the source is recorded as refused)
// its entries and pending pay parts in batches. format is the input
// format; duplicates the number of entries already in the ledger. When a
// source of the same content was committed before, nothing is stored and
// the error is ErrDuplicateSource; when an entry was paid through another
// import meanwhile, nothing is stored either. The staging is dropped.
func (s *StagedImport) Commit(format, hash string, duplicates int, rejected bool) (Committed, error) {
	if s.done {
		return Committed{}, errors.New("ledger: import: already finished")
	}
	defer s.Rollback()
	if err := s.Flush(); err != nil {
		return Committed{}, err
	}
	size, first, err := s.payload.finish()
	if err != nil {
		return Committed{}, fmt.Errorf("ledger: commit import: %w", err)
	}
	var prev int
	if err := s.l.db.QueryRowContext(s.ctx, `PRAGMA cache_size`).Scan(&prev); err == nil {
		s.l.db.ExecContext(s.ctx, fmt.Sprintf(`PRAGMA cache_size = %d`, commitCacheSize))
		defer s.l.db.ExecContext(context.WithoutCancel(s.ctx), fmt.Sprintf(`PRAGMA cache_size = %d`, prev))
	}
	c := &importCommit{s: s, now: s.l.ts(), rejected: rejected, open: map[string]*openBatch{}}
	err = s.l.tx(s.ctx, "commit import", func(tx *sql.Tx) error {
		c.tx, c.st = tx, newStmts(s.ctx, tx)
		defer c.st.close()
		return c.run(format, hash, size, first, duplicates)
	})
	if errors.Is(err, ErrDuplicateSource) {
		return Committed{}, ErrDuplicateSource
	}
	if err != nil {
		return Committed{}, err
	}
	return Committed{SourceID: c.source, RetryOf: c.retryOf, BatchIDs: c.batchIDs, Removed: c.removed}, nil
}

// PayParts hands fn the staged pay parts that Commit would batch, in
// order of index, each with its entries in the order they were added: a
// preview (paysync import --dry-run) to be followed by Rollback. fn must
// not call the ledger (the staging's connection is reading); a pay part's
// entries are in memory while fn has it.
func (s *StagedImport) PayParts(fn func(paysync.PlannedPayPart) error) error {
	if s.done {
		return errors.New("ledger: import: already finished")
	}
	if err := s.Flush(); err != nil {
		return err
	}
	rows, err := s.l.db.QueryContext(s.ctx, s.q(`SELECT p.idx, p.company_id, p.employee_id, p.employee_name, p.code, p.units, p.rate, p.amount,
			p.description, p.rule, e.entry_id, e.line
		FROM %sparts p LEFT JOIN %slinks k ON k.part = p.idx LEFT JOIN %sentries e ON e.seq = k.entry
		ORDER BY p.idx, e.seq`))
	if err != nil {
		return fmt.Errorf("ledger: preview import: %w", err)
	}
	defer rows.Close()
	var cur paysync.PlannedPayPart
	idx := int64(-1)
	for rows.Next() {
		var i int64
		var pp paysync.PlannedPayPart
		var units, rate, amount sql.NullString
		var entryID sql.NullString
		var line sql.NullInt64
		if err := rows.Scan(&i, &pp.CompanyID, &pp.EmployeeID, &pp.EmployeeName, &pp.Code, &units, &rate, &amount,
			&pp.Description, &pp.Rule, &entryID, &line); err != nil {
			return fmt.Errorf("ledger: preview import: %w", err)
		}
		if i != idx {
			if idx >= 0 {
				if err := fn(cur); err != nil {
					return err
				}
			}
			pp.Units, pp.Rate, pp.Amount = textDec(units), textDec(rate), textDec(amount)
			cur, idx = pp, i
		}
		if entryID.Valid {
			cur.Entries = append(cur.Entries, paysync.EntryRef{Source: s.in.Name, Line: int(line.Int64), ID: entryID.String})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: preview import: %w", err)
	}
	if idx >= 0 {
		return fn(cur)
	}
	return nil
}

// Rollback abandons the import: nothing of it is kept. It does nothing
// after Commit.
func (s *StagedImport) Rollback() error {
	if s.done {
		return nil
	}
	s.done = true
	s.payload.release()
	s.drop()
	return nil
}

// importCommit is Commit's transaction.
type importCommit struct {
	s        *StagedImport
	tx       *sql.Tx
	st       *stmts
	now      string
	rejected bool
	source   int64
	retryOf  int64 // the import of the same content this one takes again
	open     map[string]*openBatch
	batchIDs []int64
	removed  int // entries a period statement removes
}

type openBatch struct {
	id int64
	n  int
}

func (c *importCommit) exec(q string, args ...any) (sql.Result, error) {
	return c.tx.ExecContext(c.s.ctx, c.s.q(q), args...)
}

func (c *importCommit) run(format, hash string, size int64, first []byte, duplicates int) error {
	s, ctx := c.s, c.s.ctx
	// The same content committed before is a duplicate, unless that
	// import has rejects: then this one takes it again (Source.Retry).
	var other int64
	var rejects int
	err := c.tx.QueryRowContext(ctx, `SELECT id, rejects FROM sources WHERE content_hash = ? AND `+committedSource, hash).Scan(&other, &rejects)
	switch {
	case err == nil && rejects == 0:
		return ErrDuplicateSource
	case err == nil:
		c.retryOf = other
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	status, entries := paysync.SourceCommitted, s.nEntries
	if c.rejected {
		status, entries, duplicates = paysync.SourceRejected, 0, 0
	}
	retryOf := c.retryOf
	if c.rejected {
		retryOf = 0 // refused as a whole: it takes nothing again
	}
	if c.source, err = insertSource(c.st, s.in.Kind, s.in.Name, hash, format, size, first, status, entries, duplicates, s.nRejects, retryOf, c.now); err != nil {
		return err
	}
	if _, err := c.exec(`INSERT INTO source_chunks (source_id, seq, data) SELECT ?, seq, data FROM %schunks ORDER BY seq`, c.source); err != nil {
		return err
	}
	if _, err := c.exec(`INSERT INTO rejects (source_id, entry_id, line, field, message, hint, created_at)
		SELECT ?, entry_id, line, field, message, hint, ? FROM %srejects ORDER BY phase, seq`, c.source, c.now); err != nil {
		return err
	}
	if c.rejected {
		return nil
	}
	if s.nDropped > 0 {
		// Entries that went only into pay parts that were dropped.
		if _, err := c.exec(`UPDATE %sentries SET status = 'rejected', note = '' WHERE status = 'mapped'
			AND seq IN (SELECT l.entry FROM %slinks l JOIN %sdropped d ON d.idx = l.part)
			AND seq NOT IN (SELECT l.entry FROM %slinks l JOIN %sparts p ON p.idx = l.part)`); err != nil {
			return err
		}
	}
	res, err := c.exec(`INSERT INTO entries (`+entryCols+`)
		SELECT ?, entry_id, line, content_hash, data, status, note, origin, entry_date FROM %sentries WHERE true ORDER BY seq `+takeAgain, c.source)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != int64(s.nEntries) {
		var id string
		if err := c.tx.QueryRowContext(ctx, s.q(`SELECT s.entry_id FROM %sentries s JOIN entries e ON e.entry_id = s.entry_id WHERE e.source_id <> ? ORDER BY s.seq LIMIT 1`), c.source).Scan(&id); err != nil {
			return fmt.Errorf("%d of %d entries stored: %w", n, s.nEntries, err)
		}
		return fmt.Errorf("entry %s was already paid through an earlier import", id)
	}
	if s.nCorrections > 0 {
		res, err := c.exec(`INSERT INTO entry_corrections (entry, source_id, line, content_hash, data, state, created_at)
			SELECT e.id, ?, k.line, k.content_hash, k.data, 'pending', ? FROM %scorrections k JOIN entries e ON e.entry_id = k.entry_id ORDER BY k.seq`, c.source, c.now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != int64(s.nCorrections) {
			return fmt.Errorf("%d of %d corrections refer to a stored entry", n, s.nCorrections)
		}
	}
	if err := c.statement(); err != nil {
		return err
	}
	if err := c.payParts(); err != nil {
		return err
	}
	_, err = c.exec(`INSERT OR IGNORE INTO pay_part_entries (pay_part_id, entry_id)
		SELECT p.pay_part, e.id FROM %slinks l JOIN %spay_parts p ON p.idx = l.part JOIN %sentries s ON s.seq = l.entry JOIN entries e ON e.entry_id = s.entry_id`)
	return err
}

// statement records a tombstone correction for every entry a period
// statement no longer has (see Statement).
func (c *importCommit) statement() error {
	st := c.s.in.Statement
	if st == nil || c.s.nRejects > 0 {
		return nil
	}
	for _, p := range st.Periods {
		res, err := c.exec(`INSERT INTO entry_corrections (entry, source_id, line, content_hash, data, state, created_at)
			SELECT e.id, ?, 0, '`+statementHash+`', json_object('id', e.entry_id, 'deleted', json('true')), 'pending', ? FROM entries e
			WHERE e.origin = ? AND e.entry_date BETWEEN ? AND ? AND e.status = 'mapped'
				AND e.entry_id NOT IN (SELECT entry_id FROM %sseen)
				AND EXISTS (SELECT 1 FROM versions v JOIN lines l ON l.version = v.id JOIN groups g ON g.id = l.group_id
					WHERE v.entry = e.id AND l.counts = 1 AND g.company_id IN (SELECT value FROM json_each(?)))
				AND coalesce((SELECT k.content_hash FROM entry_corrections k WHERE k.entry = e.id AND k.state = 'pending' ORDER BY k.id DESC LIMIT 1), '') <> '`+statementHash+`'
			ORDER BY e.id`, c.source, c.now, st.Origin, p.First().Format(time.DateOnly), p.Last().Format(time.DateOnly), st.companiesJSON())
		if err != nil {
			return fmt.Errorf("statement %s: %w", p, err)
		}
		n, _ := res.RowsAffected()
		c.removed += int(n)
	}
	return nil
}

// payParts inserts the staged pay parts: per company in order of first
// appearance, each company's in order of index, into batches of at most
// BatchSize, a batch at a time; each pay part's id is noted for its
// entries.
func (c *importCommit) payParts() error {
	s, ctx := c.s, c.s.ctx
	rows, err := c.tx.QueryContext(ctx, s.q(`SELECT company_id FROM %sparts GROUP BY company_id ORDER BY min(idx)`))
	if err != nil {
		return err
	}
	var companies []string
	for rows.Next() {
		var co string
		if err := rows.Scan(&co); err != nil {
			rows.Close()
			return err
		}
		companies = append(companies, co)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if _, err := c.exec(`CREATE TEMP TABLE %spage (seq INTEGER PRIMARY KEY, idx INTEGER NOT NULL)`); err != nil {
		return err
	}
	defer c.exec(`DROP TABLE %spage`)
	var stmts [4]*sql.Stmt
	for i, q := range []string{
		// The company's next pay parts, numbered from the batch's first free seq.
		`INSERT INTO %spage (seq, idx) SELECT ? + row_number() OVER (ORDER BY idx) - 1, idx FROM
			(SELECT idx FROM %sparts WHERE company_id = ? AND idx > ? ORDER BY idx LIMIT ?)`,
		`INSERT INTO pay_parts (` + payPartCols + `)
			SELECT ?, g.seq, p.company_id, p.employee_id, p.employee_name, p.code, p.units, p.rate, p.amount, p.description, p.rule, 'pending', ?
			FROM %spage g JOIN %sparts p ON p.idx = g.idx ORDER BY g.seq`,
		`INSERT INTO %spay_parts (idx, pay_part) SELECT g.idx, pp.id FROM %spage g JOIN pay_parts pp ON pp.batch_id = ? AND pp.seq = g.seq`,
		`DELETE FROM %spage`,
	} {
		if stmts[i], err = c.tx.PrepareContext(ctx, s.q(q)); err != nil {
			return err
		}
		defer stmts[i].Close()
	}
	more, err := c.tx.PrepareContext(ctx, s.q(`SELECT 1 FROM %sparts WHERE company_id = ? AND idx > ? LIMIT 1`))
	if err != nil {
		return err
	}
	defer more.Close()
	for _, co := range companies {
		for after := -1; ; {
			var one int
			if err := more.QueryRowContext(ctx, co, after).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				break
			} else if err != nil {
				return err
			}
			b, err := c.batchFor(co)
			if err != nil {
				return err
			}
			res, err := stmts[0].ExecContext(ctx, b.n, co, after, s.in.BatchSize-b.n)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if _, err := stmts[1].ExecContext(ctx, b.id, c.now); err != nil {
				return err
			}
			if _, err := stmts[2].ExecContext(ctx, b.id); err != nil {
				return err
			}
			if err := c.tx.QueryRowContext(ctx, s.q(`SELECT max(idx) FROM %spage`)).Scan(&after); err != nil {
				return err
			}
			if _, err := stmts[3].ExecContext(ctx); err != nil {
				return err
			}
			if b.n += int(n); s.in.Accumulate && b.n >= s.in.BatchSize {
				if err := sealBatch(c.st, b.id, c.now); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// batchFor returns the batch company's next pay part goes into: the
// current one while it has room, else a new one (Accumulate: the
// company's open batch, of this import or an earlier one).
func (c *importCommit) batchFor(company string) (*openBatch, error) {
	s := c.s
	if b := c.open[company]; b != nil && b.n < s.in.BatchSize {
		return b, nil
	}
	b := &openBatch{}
	var err error
	if s.in.Accumulate {
		var ok bool
		if b.id, b.n, ok, err = openBatchOf(c.st, company); err == nil && (!ok || b.n >= s.in.BatchSize) {
			b.n = 0
			b.id, err = openNewBatch(c.st, company, c.source, c.now, c.now)
		}
	} else {
		b.id, err = insertBatchStmts(c.st, company, c.source, 0, 0, c.now)
	}
	if err != nil {
		return nil, err
	}
	c.open[company] = b
	c.batchIDs = append(c.batchIDs, b.id)
	return b, nil
}

// payloadWriter counts and stages a source's input in gzip'd chunks. The first chunk is held until a second one is needed: a source
// of one chunk keeps it in sources.payload, as CommitImport stores it.
type payloadWriter struct {
	s     *StagedImport
	size  int64
	buf   []byte // input not yet compressed
	first []byte // chunk 0, compressed, while it may be the only one
	seq   int    // chunks staged
	zw    *gzip.Writer
	out   bytes.Buffer
}

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

func (w *payloadWriter) write(p []byte) error {
	if w.buf == nil {
		w.buf = make([]byte, 0, chunkSize)
	}
	w.size += int64(len(p))
	for len(p) > 0 {
		n := min(len(p), chunkSize-len(w.buf))
		w.buf = append(w.buf, p[:n]...)
		p = p[n:]
		if len(w.buf) == chunkSize {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush compresses the buffered input into a chunk.
func (w *payloadWriter) flush() error {
	if w.zw == nil {
		w.zw = gzipWriters.Get().(*gzip.Writer)
	}
	w.out.Reset()
	w.zw.Reset(&w.out)
	if _, err := w.zw.Write(w.buf); err != nil {
		return err
	}
	if err := w.zw.Close(); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	if w.first == nil && w.seq == 0 {
		w.first = bytes.Clone(w.out.Bytes())
		return nil
	}
	if w.first != nil {
		if err := w.stage(w.first); err != nil {
			return err
		}
		w.first = nil
	}
	return w.stage(w.out.Bytes())
}

func (w *payloadWriter) stage(gz []byte) error {
	if _, err := w.s.l.db.ExecContext(w.s.ctx, `INSERT INTO `+w.s.t+`chunks (seq, data) VALUES (?, ?)`, w.seq, gz); err != nil {
		return err
	}
	w.seq++
	return nil
}

// finish stages what is left and returns the input's size and the one
// chunk to keep in sources.payload (nil when there are more).
func (w *payloadWriter) finish() (size int64, first []byte, err error) {
	if len(w.buf) > 0 || (w.first == nil && w.seq == 0) {
		if err := w.flush(); err != nil {
			return 0, nil, err
		}
	}
	w.release()
	return w.size, w.first, nil
}

func (w *payloadWriter) release() {
	if w.zw != nil {
		w.zw.Reset(io.Discard)
		gzipWriters.Put(w.zw)
		w.zw = nil
	}
	w.buf = nil
}

// CopySourcePayload writes a source's raw input to w, one stored chunk at
// a time, and returns the number of bytes written. It reads both layouts:
// the whole input in sources.payload (gzip'd, or raw when small), and
// chunks in source_chunks (sources.payload NULL).
func (l *Ledger) CopySourcePayload(ctx context.Context, id int64, w io.Writer) (int64, error) {
	var payload []byte
	if err := l.db.QueryRowContext(ctx, `SELECT payload FROM sources WHERE id = ?`, id).Scan(&payload); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			err = ErrNotFound
		}
		return 0, fmt.Errorf("ledger: payload of import %d: %w", id, err)
	}
	if payload != nil {
		return copyStored(w, payload)
	}
	var total int64
	for seq := 0; ; seq++ {
		var gz []byte
		err := l.db.QueryRowContext(ctx, `SELECT data FROM source_chunks WHERE source_id = ? AND seq = ?`, id, seq).Scan(&gz)
		if errors.Is(err, sql.ErrNoRows) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("ledger: payload of import %d: %w", id, err)
		}
		n, err := copyStored(w, gz)
		total += n
		if err != nil {
			return total, fmt.Errorf("ledger: payload of import %d, chunk %d: %w", id, seq, err)
		}
	}
}

// copyStored writes a stored payload (gzip'd, or raw when it does not
// start with the gzip magic) to w.
func copyStored(w io.Writer, b []byte) (int64, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		n, err := w.Write(b)
		return int64(n), err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	defer zr.Close()
	return io.Copy(w, zr)
}
