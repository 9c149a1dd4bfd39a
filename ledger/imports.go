package ledger

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrDuplicateSource is returned when a source with the same content was
// already committed.
var ErrDuplicateSource = errors.New("source already imported")

// NewSource is an input about to be committed.
type NewSource struct {
	Kind    paysync.SourceKind // file, stdin, nats
	Name    string
	Format  string
	Hash    string // sha256 hex of Payload
	Payload []byte
}

// NewEntry is an entry of a source with its outcome.
type NewEntry struct {
	Entry paysync.Entry
	// Origin is the source the entry is a statement of (the format or
	// preset name, --source, a NATS subject's source token).
	Origin string
	Hash   string // content hash (paysync.EntryHash)
	Status paysync.EntryStatus
	Note   string // skip reason
	Data   []byte // the entry's JSON from paysync.EntryHash (nil: marshalled here)
}

// NewReject is a problem with the input, kept for the audit trail.
type NewReject struct {
	EntryID, Field, Message, Hint string
	Line                          int
}

// ImportIntent is everything one import commits before anything is sent.
type ImportIntent struct {
	Source   *NewSource // nil for a replay
	SourceID int64      // the source of a replay
	ReplayOf int64      // the batch a replay replaces (0: none)
	Entries  []NewEntry
	// Corrections are new versions of entries paid before (by Entry.ID),
	// recorded as pending corrections for the corrector to apply.
	Corrections []NewEntry
	Duplicates  int
	Rejects     []NewReject
	PayParts    []paysync.PlannedPayPart // their Entries name entry ids, new or already in the ledger
	BatchSize   int
	// Accumulate adds the pay parts to each company's open batch (created
	// unsealed when there is none with room) instead of new sealed
	// batches: streaming sources, where one message is one entry.
	Accumulate bool
	// Rejected records the source as refused as a whole: only the source
	// and its rejects are stored (no entries, no pay parts).
	Rejected bool
	// Received, for an accumulating intent, is when its input entered the
	// system (NATS: stored in the stream): a batch it opens lingers from
	// then. Zero, in the future, or more than MaxLingerBack ago: now.
	Received time.Time
	opened   string // Received as a batch's created_at (CommitImports)

	// Recorded through the intake methods (AddEntry, Link, ...).
	links   map[int][]int64 // pay part index → entry numbers, until it is added
	dropped []int64         // entries linked to a dropped pay part
	phases  [3]int          // rejects per phase
}

// An ImportIntent is recorded the way a StagedImport is (AddEntry, Link,
// AddPayPart, DropPayPart, AddReject): one write API for intake, with this
// its cheap path for small inputs (a message), kept in memory and
// committed many at a time (CommitImports). The source, batch size and
// the rest are set on the fields.

// AddEntry adds an entry of the source and returns its number, for Link.
// data is the entry's JSON (paysync.EntryHash), nil to marshal it at
// commit.
func (in *ImportIntent) AddEntry(e NewEntry, data []byte) (int64, error) {
	if data != nil {
		e.Data = data
	}
	in.Entries = append(in.Entries, e)
	return int64(len(in.Entries)), nil
}

// AddCorrection adds a new version of an entry paid before: recorded with
// the source as a pending correction (the corrector applies it).
func (in *ImportIntent) AddCorrection(e NewEntry, data []byte) {
	if data != nil {
		e.Data = data
	}
	in.Corrections = append(in.Corrections, e)
}

// Link records that entry (a number from AddEntry) goes into the pay part
// with index part (AddPayPart, or DropPayPart).
func (in *ImportIntent) Link(entry int64, part int) {
	if in.links == nil {
		in.links = map[int][]int64{}
	}
	in.links[part] = append(in.links[part], entry)
}

// AddPayPart adds the pending pay part with index part; its entries are
// those linked to it (pp.Entries is replaced).
func (in *ImportIntent) AddPayPart(part int, pp paysync.PlannedPayPart) {
	pp.Entries = nil
	for _, seq := range in.links[part] {
		pp.Entries = append(pp.Entries, in.Entries[seq-1].Entry.Ref())
	}
	delete(in.links, part)
	in.PayParts = append(in.PayParts, pp)
}

// DropPayPart records that the pay part with index part is not sent: an
// entry that only went into dropped pay parts is stored as rejected.
func (in *ImportIntent) DropPayPart(part int) {
	in.dropped = append(in.dropped, in.links[part]...)
	delete(in.links, part)
}

// AddReject adds a problem with the input. Rejects are stored by phase
// (PhaseRead, PhaseEntry, PhasePlan), each in the order added.
func (in *ImportIntent) AddReject(phase int, r NewReject) {
	at := len(in.Rejects)
	for p := phase + 1; p < len(in.phases); p++ {
		at -= in.phases[p]
	}
	in.Rejects = slices.Insert(in.Rejects, at, r)
	in.phases[phase]++
}

// settle marks the entries that went only into dropped pay parts as
// rejected, so that a corrected source can bring them again.
func (in *ImportIntent) settle() {
	if len(in.dropped) == 0 {
		return
	}
	kept := map[string]bool{}
	for _, pp := range in.PayParts {
		for _, r := range pp.Entries {
			kept[r.ID] = true
		}
	}
	for _, seq := range in.dropped {
		if e := &in.Entries[seq-1]; e.Status == paysync.EntryMapped && !kept[e.Entry.ID] {
			e.Status, e.Note = paysync.EntryRejected, ""
		}
	}
}

// Committed says what an intent became.
type Committed struct {
	SourceID int64
	RetryOf  int64 // the import of the same content it takes again (Source.Retry), 0 for none
	BatchIDs []int64
	Removed  int // entries a period statement removes (tombstone corrections)
}

// CommitImport stores the intent in one transaction: the source and its
// payload, its entries and rejects, and the pending pay parts grouped into
// batches per company of at most BatchSize.
func (l *Ledger) CommitImport(ctx context.Context, in ImportIntent) (Committed, error) {
	var out Committed
	err := l.tx(ctx, "commit import", func(tx *sql.Tx) error {
		st := l.stmts(ctx, tx)
		defer st.close()
		var err error
		out, err = commitIntent(st, in, l.ts(), nil)
		return err
	})
	return out, err
}

// commitIntent stores one intent within st's transaction. With acc set,
// accumulating pay parts are handed to it instead of being added to open
// batches here (CommitImports adds those of many intents at once).
func commitIntent(st *stmts, in ImportIntent, now string, acc *accumulator) (Committed, error) {
	if in.BatchSize <= 0 {
		in.BatchSize = 100
	}
	in.settle()
	var out Committed
	if in.Source != nil {
		status := paysync.SourceCommitted
		if in.Rejected {
			status = paysync.SourceRejected
			in.Entries, in.PayParts, in.Corrections = nil, nil, nil
		}
		payload, err := packPayload(in.Source.Payload)
		if err != nil {
			return out, err
		}
		if st.bulk != nil {
			if out.SourceID, err = st.bulk.id(st, "sources"); err != nil {
				return out, err
			}
			st.bulk.add("sources", out.SourceID, in.Source.Kind, in.Source.Name, in.Source.Hash, in.Source.Format, int64(len(in.Source.Payload)), payload,
				status, len(in.Entries), in.Duplicates, len(in.Rejects), now)
		} else {
			out.SourceID, err = insertSource(st, in.Source.Kind, in.Source.Name, in.Source.Hash, in.Source.Format, int64(len(in.Source.Payload)), payload,
				status, len(in.Entries), in.Duplicates, len(in.Rejects), 0, now)
			if err != nil {
				return out, err
			}
		}
	} else {
		out.SourceID = in.SourceID
	}
	ids := make(map[string]int64, len(in.Entries))
	for _, e := range in.Entries {
		data := e.Data
		if data == nil {
			var err error
			if data, err = json.Marshal(e.Entry); err != nil {
				return out, err
			}
		}
		if st.bulk != nil {
			// Held for bulk: an entry already stored (even one to take
			// again) is refused at flush, and the group committed again
			// intent by intent, through the statement below.
			id, err := st.bulk.id(st, "entries")
			if err != nil {
				return out, err
			}
			st.bulk.add("entries", id, out.SourceID, e.Entry.ID, e.Entry.Line, e.Hash, data, e.Status, e.Note, e.Origin, e.Entry.Date)
			ids[e.Entry.ID] = id
			continue
		}
		// An entry seen before but never paid (rejected or skipped) is
		// taken again with its new content; a paid one never is.
		var id int64
		err := st.queryRow(`INSERT INTO entries (`+entryCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) `+takeAgain+` RETURNING id`,
			out.SourceID, e.Entry.ID, e.Entry.Line, e.Hash, data, e.Status, e.Note, e.Origin, e.Entry.Date).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return out, fmt.Errorf("entry %s was already paid through an earlier import", e.Entry.ID)
		}
		if err != nil {
			return out, err
		}
		ids[e.Entry.ID] = id
	}
	for _, c := range in.Corrections {
		if err := addCorrection(st, out.SourceID, c, now); err != nil {
			return out, err
		}
	}
	for _, r := range in.Rejects {
		if st.bulk != nil {
			st.bulk.add("rejects", out.SourceID, r.EntryID, r.Line, r.Field, r.Message, r.Hint, now)
			continue
		}
		if _, err := st.exec(`INSERT INTO rejects (source_id, entry_id, line, field, message, hint, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			out.SourceID, r.EntryID, r.Line, r.Field, r.Message, r.Hint, now); err != nil {
			return out, err
		}
	}
	// Batches: per company, in order of first appearance, at most BatchSize each.
	var companies []string
	byCompany := map[string][]paysync.PlannedPayPart{}
	for _, pp := range in.PayParts {
		if _, ok := byCompany[pp.CompanyID]; !ok {
			companies = append(companies, pp.CompanyID)
		}
		byCompany[pp.CompanyID] = append(byCompany[pp.CompanyID], pp)
	}
	for _, c := range companies {
		pps := byCompany[c]
		if in.Accumulate {
			if acc != nil {
				acc.add(c, out.SourceID, in.opened, in.BatchSize, pps, ids)
				continue
			}
			ids2, err := accumulateStmts(st, c, out.SourceID, pps, in.BatchSize, ids, now, now)
			if err != nil {
				return out, err
			}
			out.BatchIDs = append(out.BatchIDs, ids2...)
			continue
		}
		for start := 0; start < len(pps); start += in.BatchSize {
			chunk := pps[start:min(start+in.BatchSize, len(pps))]
			bid, err := insertBatchStmts(st, c, out.SourceID, 0, in.ReplayOf, now)
			if err != nil {
				return out, err
			}
			for i, pp := range chunk {
				if err := insertPayPartStmts(st, bid, i, pp, ids, now); err != nil {
					return out, err
				}
			}
			out.BatchIDs = append(out.BatchIDs, bid)
		}
	}
	return out, nil
}

// insertSource records a source; one of the same content committed
// before is ErrDuplicateSource.
func insertSource(st *stmts, kind paysync.SourceKind, name, hash, format string, size int64, payload []byte, status paysync.SourceStatus,
	entries, duplicates, rejects int, retryOf int64, now string) (int64, error) {
	res, err := st.exec(`INSERT INTO sources (kind, name, content_hash, format, size, payload, status, entries, duplicates, rejects, retry_of, received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, kind, name, hash, format, size, payload, status, entries, duplicates, rejects,
		sql.NullInt64{Int64: retryOf, Valid: retryOf != 0}, now)
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
			return 0, ErrDuplicateSource
		}
		return 0, err
	}
	return res.LastInsertId()
}

// committedSource selects the source an input of the same content is a
// duplicate of: committed, and not taken again since by an import of the
// same content (retry_of, see Source.Retry).
const committedSource = `kind <> 'replay' AND status = 'committed' AND NOT EXISTS (
	SELECT 1 FROM sources r WHERE r.retry_of = sources.id AND r.status = 'committed')`

// entryCols are an entry's columns as intake stores them.
const entryCols = `source_id, entry_id, line, content_hash, data, status, note, origin, entry_date`

// takeAgain ends an insert of entries: an entry seen before but never
// paid (rejected or skipped), or paid and no longer in payroll (reverted,
// refused), is taken again with its new content; one payroll holds never
// is (the row is not stored: the caller counts).
const takeAgain = `ON CONFLICT (entry_id) DO UPDATE SET source_id = excluded.source_id, line = excluded.line, content_hash = excluded.content_hash,
		data = excluded.data, status = excluded.status, note = excluded.note, origin = excluded.origin, entry_date = excluded.entry_date
	WHERE entries.status <> 'mapped' OR (entries.source_id <> excluded.source_id AND NOT ` + liveEntryOf + `)`

// liveEntry is whether entry e counts in the desired state, or is on its
// way there: held (not yet taken in), a line of it counts, or (an entry
// from before the desired state, not yet taken in) it has a live pay part.
const liveEntry = `(e.note = 'held' OR EXISTS (SELECT 1 FROM versions v JOIN lines l ON l.version = v.id WHERE v.entry = e.id AND l.counts = 1)
	OR (e.legacy = 1 AND EXISTS (SELECT 1 FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id
		WHERE pe.entry_id = e.id AND p.state IN ('pending', 'created') AND p.superseded_by IS NULL)))`

// liveEntryOf is liveEntry in an upsert of entries.
const liveEntryOf = `(entries.note = 'held' OR EXISTS (SELECT 1 FROM versions v JOIN lines l ON l.version = v.id WHERE v.entry = entries.id AND l.counts = 1)
	OR (entries.legacy = 1 AND EXISTS (SELECT 1 FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id
		WHERE pe.entry_id = entries.id AND p.state IN ('pending', 'created') AND p.superseded_by IS NULL)))`

// payPartCols are a pay part's columns as intake stores them.
const payPartCols = `batch_id, seq, company_id, employee_id, employee_name, code, units, rate, amount, description, rule, state, updated_at`

func insertBatch(ctx context.Context, tx *sql.Tx, company string, source, parent, replayOf int64, now string) (int64, error) {
	st := newStmts(ctx, tx)
	defer st.close()
	return insertBatchStmts(st, company, source, parent, replayOf, now)
}

func insertBatchStmts(st *stmts, company string, source, parent, replayOf int64, now string) (int64, error) {
	res, err := st.exec(`INSERT INTO batches (company_id, source_id, parent_id, replay_of, state, created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', ?, ?)`,
		company, nullID(source), nullID(parent), nullID(replayOf), now, now)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func insertPayPartStmts(st *stmts, batch int64, seq int, pp paysync.PlannedPayPart, ids map[string]int64, now string) error {
	if st.bulk != nil {
		return bulkPayPart(st, batch, seq, pp, ids, now)
	}
	res, err := st.exec(`INSERT INTO pay_parts (`+payPartCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)`,
		batch, seq, pp.CompanyID, pp.EmployeeID, pp.EmployeeName, pp.Code, decText(pp.Units), decText(pp.Rate), decText(pp.Amount), pp.Description, pp.Rule, now)
	if err != nil {
		return err
	}
	pid, _ := res.LastInsertId()
	for _, ref := range pp.Entries {
		eid, ok := ids[ref.ID]
		if !ok {
			if err := st.queryRow(`SELECT id FROM entries WHERE entry_id = ?`, ref.ID).Scan(&eid); err != nil {
				return fmt.Errorf("pay part of entry %s: entry not in the ledger: %w", ref.ID, err)
			}
			ids[ref.ID] = eid
		}
		if _, err := st.exec(`INSERT OR IGNORE INTO pay_part_entries (pay_part_id, entry_id) VALUES (?, ?)`, pid, eid); err != nil {
			return err
		}
	}
	return nil
}

// bulkPayPart is insertPayPartStmts holding the rows for bulk.
func bulkPayPart(st *stmts, batch int64, seq int, pp paysync.PlannedPayPart, ids map[string]int64, now string) error {
	pid, err := st.bulk.id(st, "pay_parts")
	if err != nil {
		return err
	}
	st.bulk.add("pay_parts", pid, batch, seq, pp.CompanyID, pp.EmployeeID, pp.EmployeeName, pp.Code, decText(pp.Units), decText(pp.Rate), decText(pp.Amount),
		pp.Description, pp.Rule, paysync.PartPending, now)
	for _, ref := range pp.Entries {
		eid, ok := ids[ref.ID]
		if !ok {
			if err := st.queryRow(`SELECT id FROM entries WHERE entry_id = ?`, ref.ID).Scan(&eid); err != nil {
				return fmt.Errorf("pay part of entry %s: entry not in the ledger: %w", ref.ID, err)
			}
			ids[ref.ID] = eid
		}
		st.bulk.add("pay_part_entries", pid, eid)
	}
	return nil
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func decText(d decimal.NullDecimal) any {
	if !d.Valid {
		return nil
	}
	return d.Decimal.String()
}

func textDec(s sql.NullString) decimal.NullDecimal {
	if !s.Valid {
		return decimal.NullDecimal{}
	}
	d, err := decimal.NewFromString(s.String)
	if err != nil {
		return decimal.NullDecimal{}
	}
	return decimal.NewNullDecimal(d)
}

func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// packPayload stores a small payload as it is (a NATS message is one
// entry: a gzip writer per message would cost more than the whole commit)
// and a larger one gzip'd; readers (copyStored) tell them apart by the gzip
// magic, which a small payload starting with it never keeps raw.
func packPayload(b []byte) ([]byte, error) {
	if len(b) < rawPayloadMax && !isGzip(b) {
		return b, nil
	}
	return gzipBytes(b)
}

const rawPayloadMax = 1 << 10

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// Source is a committed input.
type Source struct {
	ID         int64                `json:"id"`
	Kind       paysync.SourceKind   `json:"kind"`
	Name       string               `json:"name"`
	Hash       string               `json:"content_hash"`
	Format     string               `json:"format"`
	Size       int64                `json:"size"`
	Status     paysync.SourceStatus `json:"status"`
	Entries    int                  `json:"entries"`
	Duplicates int                  `json:"duplicates"`
	Rejects    int                  `json:"rejects"`
	ReceivedAt time.Time            `json:"received_at"`
	RetryOf    int64                `json:"retry_of,omitempty"` // the import of the same content it took again
}

// Retry reports whether an input of the same content as s is to be taken
// again rather than skipped as a duplicate: s has rejects, rows refused
// for a fault that may be fixed since outside the input (the rules, a
// closed period opened). Entries that landed are duplicates then; the
// refused ones get another chance.
func (s Source) Retry() bool { return s.Status == paysync.SourceCommitted && s.Rejects > 0 }

const sourceCols = `id, kind, name, content_hash, format, size, status, entries, duplicates, rejects, received_at, coalesce(retry_of, 0)`

func scanSource(sc interface{ Scan(...any) error }) (Source, error) {
	var s Source
	var at string
	err := sc.Scan(&s.ID, &s.Kind, &s.Name, &s.Hash, &s.Format, &s.Size, &s.Status, &s.Entries, &s.Duplicates, &s.Rejects, &at, &s.RetryOf)
	s.ReceivedAt = parseTS(at)
	return s, err
}

// SourceByHash finds a committed source by content hash.
func (l *Ledger) SourceByHash(ctx context.Context, hash string) (Source, bool, error) {
	s, err := scanSource(l.rdb.QueryRowContext(ctx, `SELECT `+sourceCols+` FROM sources WHERE content_hash = ? AND `+committedSource, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return Source{}, false, nil
	}
	if err != nil {
		return Source{}, false, fmt.Errorf("ledger: find source: %w", err)
	}
	return s, true, nil
}

// Source returns one source.
func (l *Ledger) Source(ctx context.Context, id int64) (Source, error) {
	s, err := scanSource(l.rdb.QueryRowContext(ctx, `SELECT `+sourceCols+` FROM sources WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Source{}, fmt.Errorf("ledger: import %d: %w", id, ErrNotFound)
	}
	return s, err
}

// SourcePayload returns a source's raw input, whichever way it is stored
// (one payload, or chunks: see CopySourcePayload).
func (l *Ledger) SourcePayload(ctx context.Context, id int64) ([]byte, error) {
	var b bytes.Buffer
	if _, err := l.CopySourcePayload(ctx, id, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// KnownEntry is an entry id already in the ledger.
type KnownEntry struct {
	Status paysync.EntryStatus
	// Live: a pay part of the entry is pending or created (and not
	// replaced). A mapped entry that is not (reverted, or refused by
	// payroll) is taken again when it comes again.
	Live bool
	// Date is the date of the version stored (a correction not applied
	// yet aside).
	Date       string
	Hash       string
	SourceID   int64
	SourceName string
	ImportedAt time.Time
}

// LookupEntries returns the known entries among ids.
func (l *Ledger) LookupEntries(ctx context.Context, ids []string) (map[string]KnownEntry, error) {
	out := map[string]KnownEntry{}
	err := queryIn(ctx, l.rdb, ids, func(in string) string {
		// A correction not yet applied is the entry's latest content: the
		// same corrected input again is a duplicate.
		return `SELECT e.entry_id, e.status, coalesce((SELECT c.content_hash FROM entry_corrections c WHERE c.entry = e.id AND c.state = 'pending'
				ORDER BY c.id DESC LIMIT 1), e.content_hash), s.id, s.name, s.received_at, ` + liveEntry + `, e.entry_date
			FROM entries e JOIN sources s ON s.id = e.source_id
			WHERE e.entry_id IN (` + in + `)`
	}, func(rows *sql.Rows) error {
		var id, at string
		var k KnownEntry
		if err := rows.Scan(&id, &k.Status, &k.Hash, &k.SourceID, &k.SourceName, &at, &k.Live, &k.Date); err != nil {
			return err
		}
		k.ImportedAt = parseTS(at)
		out[id] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: look up entries: %w", err)
	}
	return out, nil
}

// inChunk is how many keys one IN (...) takes (SQLite bounds a
// statement's parameters).
const inChunk = 500

// queryIn runs the query q builds around the placeholders of keys, a
// chunk of keys at a time, and hands each row to scan.
func queryIn(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, keys []string, q func(in string) string, scan func(*sql.Rows) error) error {
	for start := 0; start < len(keys); start += inChunk {
		part := keys[start:min(start+inChunk, len(keys))]
		args := make([]any, len(part))
		for i, k := range part {
			args[i] = k
		}
		rows, err := db.QueryContext(ctx, q(placeholders(len(part))), args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				rows.Close()
				return err
			}
		}
		if err := cmp.Or(rows.Err(), rows.Close()); err != nil {
			return err
		}
	}
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// accumulateStmts appends pay parts to the company's open (unsealed)
// batch, opening new ones as each fills up; a full batch is sealed at once.
func accumulateStmts(st *stmts, company string, source int64, pps []paysync.PlannedPayPart, size int, ids map[string]int64, now, opened string) ([]int64, error) {
	var out []int64
	for len(pps) > 0 {
		bid, n, ok, err := openBatchOf(st, company)
		if err != nil {
			return nil, err
		}
		if ok && n >= size { // filled under a larger batch size
			if err := sealBatch(st, bid, now); err != nil {
				return nil, err
			}
			ok, n = false, 0
		}
		if !ok {
			if bid, err = openNewBatch(st, company, source, now, opened); err != nil {
				return nil, err
			}
		}
		room := size - n
		take := pps[:min(room, len(pps))]
		for i, pp := range take {
			if err := insertPayPartStmts(st, bid, n+i, pp, ids, now); err != nil {
				return nil, err
			}
		}
		pps = pps[len(take):]
		if n+len(take) >= size {
			if err := sealBatch(st, bid, now); err != nil {
				return nil, err
			}
		}
		out = append(out, bid)
	}
	return out, nil
}

// openBatchOf returns the company's open batch (unsealed, pending: the
// one streaming intake adds to) and how many pay parts it holds.
func openBatchOf(st *stmts, company string) (id int64, n int, ok bool, err error) {
	err = st.queryRow(`SELECT b.id, (SELECT count(*) FROM pay_parts p WHERE p.batch_id = b.id) FROM batches b
		WHERE b.company_id = ? AND b.sealed = 0 AND b.state = 'pending' ORDER BY b.id LIMIT 1`, company).Scan(&id, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	return id, n, err == nil, err
}

// openNewBatch opens a new unsealed batch for company; created_at is when
// its first entry arrived (opened): its linger counts from then.
func openNewBatch(st *stmts, company string, source int64, now, opened string) (int64, error) {
	id, err := insertBatchStmts(st, company, source, 0, 0, now)
	if err != nil {
		return 0, err
	}
	_, err = st.exec(`UPDATE batches SET sealed = 0, created_at = ? WHERE id = ?`, opened, id)
	return id, err
}

// sealBatch seals a full batch: it is sent without lingering.
func sealBatch(st *stmts, id int64, now string) error {
	_, err := st.exec(`UPDATE batches SET sealed = 1, updated_at = ? WHERE id = ?`, now, id)
	return err
}

// SealDue seals open batches that waited at least linger, and returns
// every sealed batch that is still pending (for the sender).
func (l *Ledger) SealDue(ctx context.Context, linger time.Duration) error {
	return l.tx(ctx, "seal batches", func(tx *sql.Tx) error {
		cutoff := l.now().Add(-linger).UTC().Format(tsLayout)
		_, err := tx.ExecContext(ctx, `UPDATE batches SET sealed = 1, updated_at = ? WHERE sealed = 0 AND created_at <= ?`, l.ts(), cutoff)
		return err
	})
}

// Unsealed counts pay parts waiting in open batches.
func (l *Ledger) Unsealed(ctx context.Context) (int, error) {
	var n int
	err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE b.sealed = 0`).Scan(&n)
	return n, err
}
