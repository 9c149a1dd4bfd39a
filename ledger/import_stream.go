package ledger

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"sync"

	"github.com/paysync/paysync"
)

// StreamImport describes an import committed as it is read (BeginImport).
type StreamImport struct {
	Kind, Name string // file, stdin, nats; the source's name
	BatchSize  int    // pay parts per batch (default 100)
	// Accumulate adds the pay parts to each company's open batch (created
	// unsealed when there is none with room) instead of new sealed
	// batches: streaming sources.
	Accumulate bool
	// Rejected records the source as refused as a whole: only the source,
	// its payload and its rejects are kept (give it no entries or pay
	// parts).
	Rejected bool
}

// Reject phases: rejects are stored in this order, each phase in the
// order its rejects were added.
const (
	PhaseRead  = iota // the reader's problems
	PhaseEntry        // problems of single entries: duplicates, mapping
	PhasePlan         // problems of pay parts: values the wire cannot carry
)

// chunkSize is the most input one stored payload chunk holds.
const chunkSize = 1 << 20

// importCacheSize is SQLite's page cache during an import (negative:
// KiB), outside the Go heap.
const importCacheSize = -32 << 10

// ImportTx is one import being committed: one transaction (BEGIN
// IMMEDIATE, on the ledger's only connection) in which the source's raw
// input, its entries, rejects and pay parts are written as they are read,
// so that memory does not grow with the size of the input. Nothing of it
// is visible before Commit, and nothing is left after Rollback or a crash.
//
// What would grow with the input lives in the database instead: the entry
// ids seen (duplicates within the source), the rejects until they are
// stored in order, and which entries each aggregated pay part sums (TEMP
// tables, dropped at the end). The ledger is locked for writing until
// Commit or Rollback. An ImportTx is not safe for concurrent use.
type ImportTx struct {
	l      *Ledger
	ctx    context.Context
	tx     *sql.Tx
	in     StreamImport
	now    string
	source int64
	done   bool

	cacheSize int // the connection's page cache before the import

	payload payloadWriter

	seen, newEntry, entry, reject, link, part, partEntry, known, batch *sql.Stmt

	entries  int
	rejects  int
	linked   map[int]bool // pay parts whose entries were given by Link
	added    map[int]bool // of those, the ones added
	open     map[string]*openBatch
	batchIDs []int64
}

type openBatch struct {
	id int64
	n  int
}

// tempTables are the import's working tables: connection-private, dropped
// at the end of the transaction.
var tempTables = []string{
	`CREATE TEMP TABLE import_seen (entry_id TEXT PRIMARY KEY) WITHOUT ROWID`,
	`CREATE TEMP TABLE import_rejects (phase INTEGER NOT NULL, seq INTEGER NOT NULL, entry_id TEXT NOT NULL, line INTEGER NOT NULL,
		field TEXT NOT NULL, message TEXT NOT NULL, hint TEXT NOT NULL, PRIMARY KEY (phase, seq))`,
	`CREATE TEMP TABLE import_links (entry INTEGER NOT NULL, part INTEGER NOT NULL, PRIMARY KEY (entry, part)) WITHOUT ROWID`,
	`CREATE TEMP TABLE import_parts (idx INTEGER PRIMARY KEY, pay_part INTEGER NOT NULL)`,
}

var tempNames = []string{"import_seen", "import_rejects", "import_links", "import_parts"}

// BeginImport starts an import. Call Commit or Rollback.
func (l *Ledger) BeginImport(ctx context.Context, in StreamImport) (*ImportTx, error) {
	if in.BatchSize <= 0 {
		in.BatchSize = 100
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, l.classifyOpen("begin import", err)
	}
	t := &ImportTx{l: l, ctx: ctx, tx: tx, in: in, now: l.ts(), open: map[string]*openBatch{}}
	if err := t.begin(); err != nil {
		tx.Rollback()
		t.restore()
		return nil, fmt.Errorf("ledger: begin import: %w", err)
	}
	t.payload.t = t
	return t, nil
}

func (t *ImportTx) begin() error {
	// A larger page cache for the import's index inserts (restored after).
	if err := t.tx.QueryRowContext(t.ctx, `PRAGMA cache_size`).Scan(&t.cacheSize); err != nil {
		return err
	}
	if _, err := t.tx.ExecContext(t.ctx, fmt.Sprintf(`PRAGMA cache_size = %d`, importCacheSize)); err != nil {
		return err
	}
	for _, name := range tempNames {
		if _, err := t.tx.ExecContext(t.ctx, `DROP TABLE IF EXISTS temp.`+name); err != nil {
			return err
		}
	}
	for _, q := range tempTables {
		if _, err := t.tx.ExecContext(t.ctx, q); err != nil {
			return err
		}
	}
	// The source is inserted now, so that entries can refer to it; it stays
	// "received" (which the unique content index ignores) until Commit.
	res, err := t.tx.ExecContext(t.ctx, `INSERT INTO sources (kind, name, content_hash, format, size, payload, status, entries, duplicates, rejects, received_at)
		VALUES (?, ?, '', '', 0, NULL, 'received', 0, 0, 0, ?)`, t.in.Kind, t.in.Name, t.now)
	if err != nil {
		return err
	}
	if t.source, err = res.LastInsertId(); err != nil {
		return err
	}
	for _, s := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&t.seen, `INSERT INTO temp.import_seen (entry_id) VALUES (?) ON CONFLICT DO NOTHING`},
		{&t.newEntry, `INSERT INTO entries (source_id, entry_id, line, content_hash, data, status, note) VALUES (?, ?, ?, ?, ?, ?, ?)`},
		// An entry seen before but never paid (rejected or skipped) is taken
		// again with its new content; a paid one never is.
		{&t.entry, `INSERT INTO entries (source_id, entry_id, line, content_hash, data, status, note) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (entry_id) DO UPDATE SET source_id = excluded.source_id, line = excluded.line, content_hash = excluded.content_hash,
				data = excluded.data, status = excluded.status, note = excluded.note
			WHERE entries.status <> 'mapped'
			RETURNING id`},
		{&t.reject, `INSERT INTO temp.import_rejects (phase, seq, entry_id, line, field, message, hint) VALUES (?, ?, ?, ?, ?, ?, ?)`},
		{&t.link, `INSERT OR IGNORE INTO temp.import_links (entry, part) VALUES (?, ?)`},
		{&t.part, `INSERT INTO pay_parts (batch_id, seq, company_id, employee_id, employee_name, code, units, rate, amount, description, rule, state, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)`},
		{&t.partEntry, `INSERT OR IGNORE INTO pay_part_entries (pay_part_id, entry_id) VALUES (?, ?)`},
		{&t.known, knownQuery(lookupChunk)},
		{&t.batch, `INSERT INTO batches (company_id, source_id, parent_id, replay_of, state, created_at, updated_at) VALUES (?, ?, NULL, NULL, 'pending', ?, ?)`},
	} {
		st, err := t.tx.PrepareContext(t.ctx, s.q)
		if err != nil {
			return err
		}
		*s.st = st
	}
	return nil
}

// SourceID is the id the source gets if the import is committed.
func (t *ImportTx) SourceID() int64 { return t.source }

// Write adds p to the source's raw input (io.Writer): it is hashed,
// counted and stored gzip'd in chunks.
func (t *ImportTx) Write(p []byte) (int, error) {
	if err := t.payload.write(p); err != nil {
		return 0, fmt.Errorf("ledger: store input: %w", err)
	}
	return len(p), nil
}

// Hash is the content hash of what was written so far.
func (t *ImportTx) Hash() string {
	if t.payload.h == nil {
		return HashPayload(nil)
	}
	return hex.EncodeToString(t.payload.h.Sum(nil))
}

// Seen reports whether entry id was seen before in this import (and
// remembers it).
func (t *ImportTx) Seen(id string) (bool, error) {
	res, err := t.seen.ExecContext(t.ctx, id)
	if err != nil {
		return false, fmt.Errorf("ledger: import: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 0, err
}

const lookupChunk = 500

func knownQuery(n int) string {
	return `SELECT e.entry_id, e.status, e.content_hash, s.id, s.name, s.received_at FROM entries e JOIN sources s ON s.id = e.source_id
		WHERE e.entry_id IN (` + placeholders(n) + `)`
}

// Lookup returns the entries among ids that are already in the ledger (as
// LookupEntries, within the import's transaction).
func (t *ImportTx) Lookup(ids []string) (map[string]KnownEntry, error) {
	out := map[string]KnownEntry{}
	for start := 0; start < len(ids); start += lookupChunk {
		part := ids[start:min(start+lookupChunk, len(ids))]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		var rows *sql.Rows
		var err error
		if len(part) == lookupChunk {
			rows, err = t.known.QueryContext(t.ctx, args...)
		} else {
			rows, err = t.tx.QueryContext(t.ctx, knownQuery(len(part)), args...)
		}
		if err != nil {
			return nil, fmt.Errorf("ledger: look up entries: %w", err)
		}
		for rows.Next() {
			var id, at string
			var k KnownEntry
			if err := rows.Scan(&id, &k.Status, &k.Hash, &k.SourceID, &k.SourceName, &at); err != nil {
				rows.Close()
				return nil, err
			}
			k.ImportedAt = parseTS(at)
			out[id] = k
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AddEntry stores an entry of the source and returns its row id, for
// AddPayPart and Link. data is the entry's JSON (as EntryHash returns it),
// nil to marshal it here.
func (t *ImportTx) AddEntry(e NewEntry, data []byte) (int64, error) {
	if t.in.Rejected {
		return 0, errors.New("ledger: import: a rejected source keeps no entries")
	}
	if data == nil {
		var err error
		if data, err = json.Marshal(e.Entry); err != nil {
			return 0, err
		}
	}
	// Most entries are new: a plain insert is cheaper than the upsert.
	res, err := t.newEntry.ExecContext(t.ctx, t.source, e.Entry.ID, e.Entry.Line, e.Hash, data, e.Status, e.Note)
	var id int64
	switch {
	case err == nil:
		if id, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	case isConstraint(err):
		err = t.entry.QueryRowContext(t.ctx, t.source, e.Entry.ID, e.Entry.Line, e.Hash, data, e.Status, e.Note).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("ledger: import: entry %s was already paid through an earlier import", e.Entry.ID)
		}
		if err != nil {
			return 0, fmt.Errorf("ledger: import: entry %s: %w", e.Entry.ID, err)
		}
	default:
		return 0, fmt.Errorf("ledger: import: entry %s: %w", e.Entry.ID, err)
	}
	t.entries++
	return id, nil
}

// AddReject records a problem with the input. Rejects are stored by phase
// (PhaseRead, PhaseEntry, PhasePlan), each in the order added.
func (t *ImportTx) AddReject(phase int, r NewReject) error {
	if _, err := t.reject.ExecContext(t.ctx, phase, t.rejects, r.EntryID, r.Line, r.Field, r.Message, r.Hint); err != nil {
		return fmt.Errorf("ledger: import: reject: %w", err)
	}
	t.rejects++
	return nil
}

// Link records that the entry (a row id from AddEntry) is summed in the
// pay part with index part, added later with AddPayPart. A pay part that
// is linked but never added was dropped: an entry that only went into
// dropped pay parts is stored as rejected, so that a corrected source can
// bring it again.
func (t *ImportTx) Link(entry int64, part int) error {
	if t.linked == nil {
		t.linked, t.added = map[int]bool{}, map[int]bool{}
	}
	if _, err := t.link.ExecContext(t.ctx, entry, part); err != nil {
		return fmt.Errorf("ledger: import: %w", err)
	}
	t.linked[part] = true
	return nil
}

// AddPayPart adds a pending pay part to its company's current batch
// (opening a new one when it is full) with the given entries (row ids
// from AddEntry), and those linked to index part. pp.Entries is ignored.
// Pay parts are batched in the order they are added: per company, at most
// BatchSize each.
func (t *ImportTx) AddPayPart(part int, pp paysync.PlannedPayPart, entries ...int64) error {
	if t.in.Rejected {
		return errors.New("ledger: import: a rejected source keeps no pay parts")
	}
	b, err := t.batchFor(pp.CompanyID)
	if err != nil {
		return fmt.Errorf("ledger: import: batch: %w", err)
	}
	res, err := t.part.ExecContext(t.ctx, b.id, b.n, pp.CompanyID, pp.EmployeeID, pp.EmployeeName, pp.Code,
		decText(pp.Units), decText(pp.Rate), decText(pp.Amount), pp.Description, pp.Rule, t.now)
	if err != nil {
		return fmt.Errorf("ledger: import: pay part: %w", err)
	}
	pid, err := res.LastInsertId()
	if err != nil {
		return err
	}
	b.n++
	if t.in.Accumulate && b.n >= t.in.BatchSize {
		if _, err := t.tx.ExecContext(t.ctx, `UPDATE batches SET sealed = 1, updated_at = ? WHERE id = ?`, t.now, b.id); err != nil {
			return fmt.Errorf("ledger: import: seal batch: %w", err)
		}
	}
	for _, e := range entries {
		if _, err := t.partEntry.ExecContext(t.ctx, pid, e); err != nil {
			return fmt.Errorf("ledger: import: pay part entries: %w", err)
		}
	}
	if t.linked[part] {
		if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO temp.import_parts (idx, pay_part) VALUES (?, ?)`, part, pid); err != nil {
			return fmt.Errorf("ledger: import: %w", err)
		}
		t.added[part] = true
	}
	return nil
}

// batchFor returns the batch company's next pay part goes into.
func (t *ImportTx) batchFor(company string) (*openBatch, error) {
	b := t.open[company]
	if b != nil && b.n < t.in.BatchSize {
		return b, nil
	}
	if t.in.Accumulate {
		// The company's open batch, of this import or an earlier one.
		var ob openBatch
		err := t.tx.QueryRowContext(t.ctx, `SELECT b.id, (SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id) FROM batches b
			WHERE b.company_id = ? AND b.sealed = 0 AND b.state = 'pending' ORDER BY b.id LIMIT 1`, company).Scan(&ob.id, &ob.n)
		switch {
		case err == nil && ob.n < t.in.BatchSize:
			t.open[company] = &ob
			t.batchIDs = append(t.batchIDs, ob.id)
			return &ob, nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return nil, err
		}
	}
	res, err := t.batch.ExecContext(t.ctx, company, t.source, t.now, t.now)
	if err != nil {
		return nil, err
	}
	b = &openBatch{}
	if b.id, err = res.LastInsertId(); err != nil {
		return nil, err
	}
	if t.in.Accumulate {
		if _, err := t.tx.ExecContext(t.ctx, `UPDATE batches SET sealed = 0 WHERE id = ?`, b.id); err != nil {
			return nil, err
		}
	}
	t.open[company] = b
	t.batchIDs = append(t.batchIDs, b.id)
	return b, nil
}

// Commit stores the source as committed (or rejected, see
// StreamImport.Rejected) with the hash and size of everything written,
// and commits. format is the input format; duplicates the number of
// entries already in the ledger. When a source of the same content was
// committed before, nothing is stored and the error is ErrDuplicateSource.
func (t *ImportTx) Commit(format string, duplicates int) (Committed, error) {
	if t.done {
		return Committed{}, errors.New("ledger: import: already finished")
	}
	out := Committed{SourceID: t.source}
	err := t.commit(format, duplicates)
	if err != nil {
		t.Rollback()
		if errors.Is(err, ErrDuplicateSource) {
			return Committed{}, err
		}
		return Committed{}, fmt.Errorf("ledger: commit import: %w", err)
	}
	t.done = true
	err = t.tx.Commit()
	t.restore()
	if err != nil {
		return Committed{}, t.l.classifyOpen("commit import", err)
	}
	out.BatchIDs = t.batchIDs
	sort.Slice(out.BatchIDs, func(i, j int) bool { return out.BatchIDs[i] < out.BatchIDs[j] })
	return out, nil
}

func (t *ImportTx) commit(format string, duplicates int) error {
	hash, size, first, err := t.payload.finish()
	if err != nil {
		return err
	}
	var other int64
	err = t.tx.QueryRowContext(t.ctx, `SELECT id FROM sources WHERE content_hash = ? AND kind <> 'replay' AND status = 'committed'`, hash).Scan(&other)
	switch {
	case err == nil:
		return ErrDuplicateSource
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	// Entries that went only into pay parts that were dropped.
	var dropped []any
	for p := range t.linked {
		if !t.added[p] {
			dropped = append(dropped, p)
		}
	}
	if len(t.linked) > 0 {
		if _, err := t.tx.ExecContext(t.ctx, `INSERT OR IGNORE INTO pay_part_entries (pay_part_id, entry_id)
			SELECT p.pay_part, l.entry FROM temp.import_links l JOIN temp.import_parts p ON p.idx = l.part`); err != nil {
			return err
		}
	}
	if len(dropped) > 0 {
		if _, err := t.tx.ExecContext(t.ctx, `UPDATE entries SET status = 'rejected' WHERE status = 'mapped' AND id IN (
			SELECT entry FROM temp.import_links GROUP BY entry HAVING sum(part IN (SELECT idx FROM temp.import_parts)) = 0)`); err != nil {
			return err
		}
	}
	if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO rejects (source_id, entry_id, line, field, message, hint, created_at)
		SELECT ?, entry_id, line, field, message, hint, ? FROM temp.import_rejects ORDER BY phase, seq`, t.source, t.now); err != nil {
		return err
	}
	status, entries := "committed", t.entries
	if t.in.Rejected {
		status, entries, duplicates = "rejected", 0, 0
	}
	if _, err := t.tx.ExecContext(t.ctx, `UPDATE sources SET content_hash = ?, format = ?, size = ?, payload = ?, status = ?, entries = ?, duplicates = ?, rejects = ?
		WHERE id = ?`, hash, format, size, first, status, entries, duplicates, t.rejects, t.source); err != nil {
		if isConstraint(err) {
			return ErrDuplicateSource
		}
		return err
	}
	for _, name := range tempNames {
		if _, err := t.tx.ExecContext(t.ctx, `DROP TABLE temp.`+name); err != nil {
			return err
		}
	}
	return nil
}

// Rollback abandons the import: nothing of it is kept. It does nothing
// after Commit.
func (t *ImportTx) Rollback() error {
	t.payload.release()
	if t.done {
		return nil
	}
	t.done = true
	err := t.tx.Rollback()
	t.restore()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// restore gives the connection back its page cache size.
func (t *ImportTx) restore() {
	if t.cacheSize != 0 {
		t.l.db.ExecContext(context.WithoutCancel(t.ctx), fmt.Sprintf(`PRAGMA cache_size = %d`, t.cacheSize))
	}
}

// payloadWriter hashes, counts and stores a source's input in gzip'd
// chunks. The first chunk is held until a second one is needed: a source
// of one chunk keeps it in sources.payload, as CommitImport stores it.
type payloadWriter struct {
	t     *ImportTx
	h     hash.Hash
	size  int64
	buf   []byte // input not yet compressed
	first []byte // chunk 0, compressed, while it may be the only one
	seq   int    // chunks stored in source_chunks
	zw    *gzip.Writer
	out   bytes.Buffer
}

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

func (w *payloadWriter) write(p []byte) error {
	if w.h == nil {
		w.h = sha256.New()
		w.buf = make([]byte, 0, chunkSize)
	}
	w.h.Write(p)
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
		if err := w.store(w.first); err != nil {
			return err
		}
		w.first = nil
	}
	return w.store(w.out.Bytes())
}

func (w *payloadWriter) store(gz []byte) error {
	if _, err := w.t.tx.ExecContext(w.t.ctx, `INSERT INTO source_chunks (source_id, seq, data) VALUES (?, ?, ?)`, w.t.source, w.seq, gz); err != nil {
		return err
	}
	w.seq++
	return nil
}

// finish stores what is left and returns the input's hash and size, and
// the one chunk to keep in sources.payload (nil when there are more).
func (w *payloadWriter) finish() (hash string, size int64, first []byte, err error) {
	if w.h == nil {
		w.h = sha256.New()
	}
	if len(w.buf) > 0 || (w.first == nil && w.seq == 0) {
		if err := w.flush(); err != nil {
			return "", 0, nil, err
		}
	}
	w.release()
	return hex.EncodeToString(w.h.Sum(nil)), w.size, w.first, nil
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
