package mapping

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/paysync/paysync"
)

// The presets read the detailed CSV exports of Toggl Track, Clockify and
// Harvest as the tools write them (see notes/peers.md §5). Their rows
// carry no id, so each entry gets one from its natural key: the preset
// name and the first 16 hex digits of a SHA-256 over the cells that say
// which piece of work a row is, never over what it is worth, so a
// corrected row (another duration, end, tag, billable flag or amount)
// keeps its id and is a correction of the entry, not a new one:
//
//	toggl, clockify  person (Email, else User), Start date, Start time,
//	                 Project, Task, Description
//	harvest          person (Employee Id, else First Name + Last Name),
//	                 Date, Project, Task, Notes, External Reference URL
//	                 (when present)
//
// The email is compared without (ASCII) case and the date as the date it
// parses to (2024-03-04 and 3/4/2024 are one key). Rows sharing a key
// within one file are told apart by their order: the first gets the key,
// the next "-2", "-3", ... So a re-export that reorders two such rows
// (that differ in hours, tags, ...) swaps their ids, and each becomes a
// correction of the other: payroll still ends up holding exactly the
// file's rows, but the pay parts they feed (one person, one date) are
// re-created for nothing.

// Column roles of the presets.
const (
	rUser = iota
	rEmail
	rFirst
	rLast
	rEmployeeID
	rDate
	rStartTime
	rEndDate
	rEndTime
	rDuration    // clock or decimal hours
	rDurationDec // Clockify's decimal twin of Duration (h)
	rProject
	rTask
	rDescription
	rTags
	rBillable
	rApproved
	rExtRef
	rAmount // Toggl's billing amount: Fields["billable_amount"], never Entry.Amount
	numRoles
)

type presetCol struct {
	header string // as the tool writes it; ending in "(" it matches a prefix
	role   int
	field  bool // also kept in Entry.Fields (cells not otherwise in the entry)
}

type presetSpec struct {
	format   Format
	name     string // for messages
	cols     []presetCol
	required [][]int // each: at least one of these roles
	person   [][]int // the person in the natural key: the first of these with a cell
	keyRoles []int   // the rest of the natural key, in hash order (rDate parsed)
	dateHint string
}

var presets = map[Format]*presetSpec{
	FormatToggl: {
		format: FormatToggl, name: "Toggl Track detailed report",
		cols: []presetCol{
			{"User", rUser, false}, {"Email", rEmail, false}, {"Project", rProject, false},
			{"Task", rTask, false}, {"Description", rDescription, false}, {"Billable", rBillable, false},
			{"Start date", rDate, false}, {"Start time", rStartTime, true}, {"End date", rEndDate, true},
			{"End time", rEndTime, true}, {"Duration", rDuration, false}, {"Tags", rTags, false},
			{"Amount (", rAmount, false},
		},
		required: [][]int{{rUser}, {rEmail}, {rDate}, {rDuration}},
		person:   [][]int{{rEmail}, {rUser}},
		keyRoles: []int{rDate, rStartTime, rProject, rTask, rDescription},
		dateHint: "Toggl writes YYYY-MM-DD; if this file was re-saved in another format, set " + settingDateFormat.String() + " to it",
	},
	FormatClockify: {
		format: FormatClockify, name: "Clockify detailed report",
		cols: []presetCol{
			{"Project", rProject, false}, {"Description", rDescription, false}, {"Task", rTask, false},
			{"User", rUser, false}, {"Email", rEmail, false}, {"Tags", rTags, false},
			{"Billable", rBillable, false}, {"Start Date", rDate, false}, {"Start Time", rStartTime, true},
			{"End Date", rEndDate, true}, {"End Time", rEndTime, true}, {"Duration (h)", rDuration, false},
			{"Duration (decimal)", rDurationDec, false},
		},
		required: [][]int{{rUser}, {rDate}, {rDuration, rDurationDec}},
		person:   [][]int{{rEmail}, {rUser}},
		keyRoles: []int{rDate, rStartTime, rProject, rTask, rDescription},
		dateHint: "Clockify writes dates in the workspace's date format: set " + settingDateFormat.String() + " to it (e.g. DD/MM/YYYY or MM/DD/YYYY)",
	},
	FormatHarvest: {
		format: FormatHarvest, name: "Harvest detailed time report",
		cols: []presetCol{
			{"Date", rDate, false}, {"Project", rProject, false}, {"Task", rTask, false},
			{"Notes", rDescription, false}, {"Hours", rDuration, false}, {"Billable?", rBillable, false},
			{"Approved?", rApproved, false}, {"First Name", rFirst, false}, {"Last Name", rLast, false},
			{"Employee Id", rEmployeeID, false}, {"External Reference URL", rExtRef, true},
		},
		required: [][]int{{rDate}, {rDuration}, {rFirst}, {rLast}},
		person:   [][]int{{rEmployeeID}, {rFirst, rLast}},
		keyRoles: []int{rDate, rProject, rTask, rDescription, rExtRef},
		dateHint: "Harvest writes YYYY-MM-DD or M/D/YYYY; set " + settingDateFormat.String() + " to the one the file uses",
	},
}

// presetReader reads one tool's export.
type presetReader struct {
	spec   *presetSpec
	prefix string // "toggl-"
	rows   *csvRows
	cells  cellParser
	col    [numRoles]int // -1 when absent
	extras []presetExtra
	seen   occurrences
	key    []byte // scratch for the id hash
}

// presetExtra is a column kept in Entry.Fields.
type presetExtra struct {
	col      int
	key      string
	currency string // from a money header such as "Billable Rate (USD)"
}

func newPresetReader(format Format, source string, g *inputGuard, br *bufio.Reader, comma rune, opts ReadOptions) (*presetReader, error) {
	spec := presets[format]
	var dates dateParser
	var err error
	if format == FormatHarvest && strings.TrimSpace(opts.DateFormat) == "" {
		dates, err = newDateParser(isoDate, "M/D/YYYY")
	} else {
		dates, err = newDateParser(opts.DateFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	rows, err := newCSVRows(source, g, br, comma)
	if err != nil {
		return nil, err
	}
	r := &presetReader{spec: spec, prefix: string(format) + "-", rows: rows,
		cells: cellParser{source: source, decimalComma: opts.DecimalComma, dates: dates, dateHint: spec.dateHint, zone: opts.zone()}}
	for i := range r.col {
		r.col[i] = -1
	}
	for i, h := range rows.header {
		k := headerKey(h)
		pc, ok := spec.match(k)
		if ok && r.col[pc.role] < 0 {
			r.col[pc.role] = i
			if !pc.field && pc.role != rAmount {
				continue
			}
		}
		if h == "" {
			continue
		}
		x := presetExtra{col: i}
		x.key, x.currency = fieldKey(k)
		if ok && pc.role == rAmount {
			x.key = "billable_amount"
		}
		r.extras = append(r.extras, x)
	}
	var missing []string
	for _, any := range spec.required {
		found := false
		for _, role := range any {
			found = found || r.col[role] >= 0
		}
		if !found {
			var names []string
			for _, role := range any {
				names = append(names, spec.header(role))
			}
			missing = append(missing, strings.Join(names, " or "))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: not a %s: missing columns %s (header: %s)",
			source, spec.name, strings.Join(missing, ", "), strings.Join(rows.header, ", "))
	}
	return r, nil
}

func (s *presetSpec) match(key string) (presetCol, bool) {
	for _, c := range s.cols {
		h := headerKey(c.header)
		if key == h || (strings.HasSuffix(h, "(") && strings.HasPrefix(key, h)) {
			return c, true
		}
	}
	return presetCol{}, false
}

// header names a role's column as the tool writes it, for messages.
func (s *presetSpec) header(role int) string {
	for _, c := range s.cols {
		if c.role == role {
			return c.header
		}
	}
	return ""
}

// fieldKey turns a header into an Entry.Fields key (snake_case), taking a
// currency in parentheses off: "Billable Rate (USD)" → billable_rate, USD.
func fieldKey(k string) (key, currency string) {
	if i := strings.LastIndexByte(k, '('); i >= 0 && strings.HasSuffix(k, ")") {
		c := strings.TrimSpace(k[i+1 : len(k)-1])
		if len(c) == 3 && isLetter(c[0]) && isLetter(c[1]) && isLetter(c[2]) {
			k, currency = k[:i], strings.ToUpper(c)
		}
	}
	var b strings.Builder
	sep := false
	for _, c := range k {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 0x80 {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(c)
			sep = false
		} else {
			sep = true
		}
	}
	if b.Len() == 0 {
		return k, currency
	}
	return b.String(), currency
}

func (r *presetReader) cell(rec []string, role int) string {
	if i := r.col[role]; i >= 0 && i < len(rec) {
		return strings.TrimSpace(rec[i])
	}
	return ""
}

func (r *presetReader) name(role int) string { return r.rows.header[r.col[role]] }

// Next returns the next entry, a *Problem for a bad row (reading goes on),
// io.EOF, or a fatal error.
func (r *presetReader) Next() (paysync.Entry, error) {
	rec, line, err := r.rows.next()
	if err != nil {
		return paysync.Entry{}, err
	}
	e, err := r.entry(rec, line)
	if err != nil {
		return paysync.Entry{}, err
	}
	return e, nil
}

func (r *presetReader) entry(rec []string, line int) (paysync.Entry, error) {
	var err error
	c := &r.cells
	e := paysync.Entry{Source: c.source, Line: line}
	e.ID = r.id(rec)
	switch r.spec.format {
	case FormatHarvest:
		e.Name = strings.TrimSpace(r.cell(rec, rFirst) + " " + r.cell(rec, rLast))
		e.EmployeeNumber = r.cell(rec, rEmployeeID)
		if e.Name == "" && e.EmployeeNumber == "" {
			return e, c.problem(line, e.ID, r.name(rFirst), "no first or last name", "Harvest rows name the person by First Name and Last Name")
		}
	default:
		e.Name = r.cell(rec, rUser)
		e.Email = r.cell(rec, rEmail)
		if e.Name == "" && e.Email == "" {
			return e, c.problem(line, e.ID, r.name(rUser), "no user or email", "the export must name the person in User or Email")
		}
	}
	if e.Date, err = c.date(line, e.ID, r.name(rDate), r.cell(rec, rDate)); err != nil {
		return e, err
	}
	dur, role := r.cell(rec, rDuration), rDuration
	if dur == "" && r.col[rDurationDec] >= 0 {
		dur, role = r.cell(rec, rDurationDec), rDurationDec
	}
	if dur == "" {
		return e, c.problem(line, e.ID, r.name(role), "no duration", "every row needs its time")
	}
	if e.Hours, err = c.hours(line, e.ID, r.name(role), dur); err != nil {
		return e, err
	}
	e.Project = r.cell(rec, rProject)
	e.Type = r.cell(rec, rTask)
	e.Description = r.cell(rec, rDescription)
	e.Tags = splitTags(r.cell(rec, rTags))
	e.Billable = yesNo(&e, "billable", r.cell(rec, rBillable))
	e.Approved = yesNo(&e, "approved", r.cell(rec, rApproved))
	for _, x := range r.extras {
		v := strings.TrimSpace(rec[x.col])
		if v == "" {
			continue
		}
		if e.Fields == nil {
			e.Fields = make(map[string]string, len(r.extras)+1)
		}
		e.Fields[x.key] = v
		if x.currency != "" {
			e.Fields["currency"] = x.currency
		}
	}
	return e, nil
}

// id derives the entry id from the row's natural key (see the top of
// this file), numbering repeats of a key within the file.
func (r *presetReader) id(rec []string) string {
	r.key = r.key[:0]
	for _, roles := range r.spec.person {
		for _, role := range roles {
			if v := r.cell(rec, role); v != "" {
				if len(r.key) > 0 {
					r.key = append(r.key, ' ')
				}
				r.key = append(r.key, v...)
			}
		}
		if len(r.key) > 0 {
			if roles[0] == rEmail {
				for i, c := range r.key {
					if 'A' <= c && c <= 'Z' {
						r.key[i] = c + 'a' - 'A'
					}
				}
			}
			break
		}
	}
	n := len(r.key) // without trailing empty cells: a column added empty changes no key
	for _, role := range r.spec.keyRoles {
		v := r.cell(rec, role)
		if role == rDate {
			if d, ok := r.cells.dates.parse(v); ok {
				v = d
			}
		}
		r.key = append(r.key, 0x1f)
		r.key = append(r.key, v...)
		if v != "" {
			n = len(r.key)
		}
	}
	r.key = r.key[:n]
	sum := sha256.Sum256(r.key)
	var b [16]byte
	hex.Encode(b[:], sum[:8])
	id := r.prefix + string(b[:])
	if n := r.seen.add(binary.BigEndian.Uint64(sum[:8])); n > 1 {
		id += "-" + strconv.FormatUint(uint64(n), 10)
	}
	return id
}

// occurrences counts the ids seen in one file, to number repeats. It
// keeps 8 bytes per distinct id in an open-addressing table kept at most
// 3/4 full (11–22 bytes per row), plus a map for the ids seen twice.
type occurrences struct {
	slots []uint64 // 0: empty
	n     int
	dups  map[uint64]uint32 // count of ids seen more than once
}

// add records k and returns how often it has been seen, this time included.
func (o *occurrences) add(k uint64) uint32 {
	if k == 0 {
		k = 1 // 0 marks an empty slot; a collision here only adds a suffix
	}
	if (o.n+1)*4 > len(o.slots)*3 {
		o.grow()
	}
	mask := uint64(len(o.slots) - 1)
	for i := k & mask; ; i = (i + 1) & mask {
		switch o.slots[i] {
		case 0:
			o.slots[i] = k
			o.n++
			return 1
		case k:
			if o.dups == nil {
				o.dups = make(map[uint64]uint32)
			}
			c := o.dups[k]
			if c == 0 {
				c = 1
			}
			c++
			o.dups[k] = c
			return c
		}
	}
}

func (o *occurrences) grow() {
	old := o.slots
	size := 2 * len(old)
	if size == 0 {
		size = 1024
	}
	o.slots = make([]uint64, size)
	mask := uint64(size - 1)
	for _, k := range old {
		if k == 0 {
			continue
		}
		i := k & mask
		for o.slots[i] != 0 {
			i = (i + 1) & mask
		}
		o.slots[i] = k
	}
}
