package mapping

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// csvRows reads the records of a CSV source: the header, then rows, with
// their first line numbers. Shared by the generic reader and the presets.
type csvRows struct {
	source string
	guard  *inputGuard
	cr     *csv.Reader
	header []string // as written, trimmed
	err    error    // sticky: io.EOF or fatal
	line   int      // first line of the last record read
}

func newCSVRows(source string, g *inputGuard, br *bufio.Reader, comma rune) (*csvRows, error) {
	cr := csv.NewReader(br)
	cr.Comma = comma
	cr.FieldsPerRecord = -1 // checked here, with a clearer message
	cr.ReuseRecord = true
	rows := &csvRows{source: source, guard: g, cr: cr}
	g.reset()
	rec, err := cr.Read()
	switch {
	case err == io.EOF:
		return nil, fmt.Errorf("%s: empty input: want a CSV header line", source)
	case errors.Is(err, errRecordTooLarge):
		return nil, fmt.Errorf("%s: header larger than %s", source, sizeText(maxRecordBytes))
	case err != nil:
		return nil, fmt.Errorf("%s: header: %w", source, err)
	}
	rows.header = make([]string, len(rec))
	for i, h := range rec {
		rows.header[i] = strings.TrimSpace(strings.TrimPrefix(h, "\uFEFF"))
	}
	return rows, nil
}

// index maps header keys (headerKey) to column indexes; the first of
// duplicate names wins.
func (r *csvRows) index() map[string]int {
	m := make(map[string]int, len(r.header))
	for i, h := range r.header {
		if _, dup := m[headerKey(h)]; !dup {
			m[headerKey(h)] = i
		}
	}
	return m
}

// next returns the next row that is not blank, with its first line. A row
// CSV cannot parse, or with the wrong number of fields, is a *Problem.
// The row is valid until the next call.
func (r *csvRows) next() ([]string, int, error) {
	if r.err != nil {
		return nil, 0, r.err
	}
	for {
		r.guard.reset()
		rec, err := r.cr.Read()
		if err != nil {
			var pe *csv.ParseError
			switch {
			case err == io.EOF:
				r.err = io.EOF
			case errors.Is(err, errRecordTooLarge):
				r.err = fmt.Errorf("%s: the record after line %d is larger than %s (an unbalanced quote?)", r.source, r.line, sizeText(maxRecordBytes))
			case errors.As(err, &pe):
				return nil, 0, &Problem{Source: r.source, Line: pe.StartLine, Msg: csvMsg(pe),
					Hint: `quote a field that holds a quote, the delimiter or a line break, and double the quotes inside ("")`}
			default:
				r.err = fmt.Errorf("%s: %w", r.source, err)
			}
			return nil, 0, r.err
		}
		line, _ := r.cr.FieldPos(0)
		r.line = line
		if blankRow(rec) {
			continue
		}
		if len(rec) != len(r.header) {
			return rec, line, &Problem{Source: r.source, Line: line,
				Msg:  fmt.Sprintf("row has %d fields, header has %d", len(rec), len(r.header)),
				Hint: "check the delimiter and the quoting in this row"}
		}
		return rec, line, nil
	}
}

func csvMsg(pe *csv.ParseError) string {
	switch {
	case errors.Is(pe.Err, csv.ErrBareQuote):
		return fmt.Sprintf("bare quote in an unquoted field (line %d, column %d)", pe.Line, pe.Column)
	case errors.Is(pe.Err, csv.ErrQuote):
		return fmt.Sprintf("stray or missing quote in a quoted field (line %d, column %d)", pe.Line, pe.Column)
	}
	return pe.Error()
}

// blankRow reports a row of empty cells, as spreadsheets leave at the end.
func blankRow(rec []string) bool {
	for _, f := range rec {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

// cellParser parses the values of one source's cells, and words its
// problems.
type cellParser struct {
	source       string
	decimalComma bool
	dates        dateParser
	dateHint     string
	zone         *time.Location // the day of a timestamp cell
}

func (c *cellParser) problem(line int, id, field, msg, hint string) *Problem {
	return &Problem{Source: c.source, Line: line, EntryID: id, Field: field, Msg: msg, Hint: hint}
}

func (c *cellParser) date(line int, id, field, s string) (string, error) {
	if s == "" {
		return "", c.problem(line, id, field, "no date", "every row needs a date")
	}
	d, ok := c.dates.parse(s)
	if !ok {
		d, ok = zonedDate(s, c.zone)
	}
	if !ok {
		return "", c.problem(line, id, field, fmt.Sprintf("%q is not a date in the format %s", s, c.dates.format()), c.dateHint)
	}
	return d, nil
}

// numberHint says how to write a number, and names the decimal comma
// setting (--decimal-comma) when the separator is what failed.
func (c *cellParser) numberHint(s string) string {
	if c.decimalComma {
		return "write a number with a decimal comma, like 7,5, or turn off the decimal comma (" + settingDecimalComma.String() + ")"
	}
	if strings.Contains(s, ",") && !strings.Contains(s, ".") {
		return "the file writes numbers with a decimal comma: turn on the decimal comma (" + settingDecimalComma.String() + ")"
	}
	return "write a number with a decimal point, like 7.5 (for 7,5 turn on the decimal comma: " + settingDecimalComma.String() + ")"
}

func (c *cellParser) hours(line int, id, field, s string) (paysync.Hours, error) {
	h, err := parseHours(s, c.decimalComma)
	if err != nil {
		hint := "write decimal hours (" + c.numberExample() + ") or a duration like 7:30 or 7:30:00"
		switch {
		case c.decimalComma && strings.Contains(s, "."):
			hint += ", or turn off the decimal comma (" + settingDecimalComma.String() + ")"
		case !c.decimalComma && strings.Contains(s, ",") && !strings.Contains(s, "."):
			hint = "the file writes numbers with a decimal comma: turn on the decimal comma (" + settingDecimalComma.String() + ")"
		}
		return h, c.problem(line, id, field, err.Error(), hint)
	}
	return h, nil
}

func (c *cellParser) numberExample() string {
	if c.decimalComma {
		return "7,5"
	}
	return "7.5"
}

func (c *cellParser) decimal(line int, id, field, s string) (decimal.NullDecimal, error) {
	d, err := parseDecimal(s, c.decimalComma)
	if err != nil {
		return decimal.NullDecimal{}, c.problem(line, id, field, err.Error(), c.numberHint(s))
	}
	return decimal.NullDecimal{Decimal: d, Valid: true}, nil
}

// yesNo reads a yes/no cell into the entry. A value that is not one fails
// no row: the entry keeps it as text in Fields[key] ("billable",
// "approved"), and the mapper raises it only when a rule or
// skip.unapproved needs it.
func yesNo(e *paysync.Entry, key, s string) *bool {
	if s == "" {
		return nil
	}
	b, ok := parseYesNo(s)
	if !ok {
		if e.Fields == nil {
			e.Fields = make(map[string]string, 4)
		}
		e.Fields[key] = s
		return nil
	}
	return &b
}

// parseYesNo reads yes or no as people and the time trackers write them,
// without case: yes/no, true/false, y/n, 1/0, ja/nej/nein/nei, oui/non,
// sí/si/no, はい/いいえ.
func parseYesNo(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "yes", "y", "true", "1", "ja", "oui", "sí", "si", "はい":
		return true, true
	case "no", "n", "false", "0", "nej", "nein", "nei", "non", "いいえ":
		return false, true
	}
	return false, false
}

// splitTags splits a tags cell on ',', ';' or '|' and trims each tag.
func splitTags(s string) []string {
	if s == "" {
		return nil
	}
	var tags []string
	for s != "" {
		i := strings.IndexAny(s, ",;|")
		t := s
		if i >= 0 {
			t, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

// parseDecimal is paysync.ParseDecimal with a fast path for plain numbers
// (-digits[.digits], at most 18 digits), which are most of them.
func parseDecimal(s string, decimalComma bool) (decimal.Decimal, error) {
	if m, scale, ok := plainDecimal(s, decimalComma); ok {
		return decimal.New(m, -scale), nil
	}
	return paysync.ParseDecimal(s, decimalComma)
}

// plainDecimal reads -?digits[(.|,)digits] with at most 18 digits into a
// mantissa and a scale.
func plainDecimal(s string, decimalComma bool) (m int64, scale int32, ok bool) {
	sep := byte('.')
	if decimalComma {
		sep = ','
	}
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 19 {
		return 0, 0, false
	}
	digits, dot := 0, -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + int64(c-'0')
			digits++
		case c == sep && dot < 0 && i > 0 && i < len(s)-1:
			dot = i
		default:
			return 0, 0, false
		}
	}
	if digits > 18 {
		return 0, 0, false
	}
	if dot >= 0 {
		scale = int32(len(s) - dot - 1)
	}
	if neg {
		m = -m
	}
	return m, scale, true
}

// parseHours is paysync.ParseHours with fast paths for plain decimal hours
// and for H:MM[:SS] durations.
func parseHours(s string, decimalComma bool) (paysync.Hours, error) {
	if m, scale, ok := plainDecimal(s, decimalComma); ok && m < 1<<50 && m > -(1<<50) {
		return paysync.Hours{Seconds: decimal.New(m*3600, -scale), Valid: true}, nil
	}
	if secs, ok := plainClock(s); ok {
		return paysync.HoursFromSeconds(secs), nil
	}
	return paysync.ParseHours(s, decimalComma)
}

// plainClock reads -?H{1,9}:MM[:SS] into seconds.
func plainClock(s string) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	var h int64
	i := 0
	for i < len(s) && i < 10 && s[i] >= '0' && s[i] <= '9' {
		h = h*10 + int64(s[i]-'0')
		i++
	}
	if i == 0 || i > 9 {
		return 0, false
	}
	secs := h * 3600
	s = s[i:]
	mul := int64(60)
	for k := 0; k < 2 && s != ""; k++ {
		if len(s) < 3 || s[0] != ':' || s[1] < '0' || s[1] > '5' || s[2] < '0' || s[2] > '9' {
			return 0, false
		}
		secs += mul * int64((s[1]-'0')*10+s[2]-'0')
		mul = 1
		s = s[3:]
	}
	if s != "" || mul == 60 {
		return 0, false
	}
	if neg {
		secs = -secs
	}
	return secs, true
}

// csvReader reads generic CSV with a header, columns mapped to entry
// fields by name (ReadOptions.Columns).
type csvReader struct {
	rows   *csvRows
	cells  cellParser
	col    [numFields]int // column of each field, -1 when absent
	extras []int          // columns kept in Entry.Fields under their header
}

func newCSVReader(source string, g *inputGuard, br *bufio.Reader, comma rune, opts ReadOptions) (*csvReader, error) {
	dates, err := newDateParser(opts.DateFormat)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	for f := range opts.Columns {
		if fieldIndex(f) < 0 {
			return nil, fmt.Errorf("%s: columns: %q is not an entry field (fields: %s)", source, f, strings.Join(fieldNames[:], ", "))
		}
	}
	rows, err := newCSVRows(source, g, br, comma)
	if err != nil {
		return nil, err
	}
	r := &csvReader{rows: rows, cells: cellParser{source: source, decimalComma: opts.DecimalComma, dates: dates, zone: opts.zone(),
		dateHint: "dates must be " + dates.format() + "; set the date format (" + settingDateFormat.String() + ") to the one the file uses"}}
	idx := rows.index()
	used := make([]bool, len(rows.header))
	var missing []string
	var unmet [numFields]bool // configured, but not found
	// Configured columns first, so that a default never takes their column.
	for pass := 0; pass < 2; pass++ {
		for f, name := range fieldNames {
			want, explicit := opts.Columns[name]
			explicit = explicit && strings.TrimSpace(want) != ""
			if explicit != (pass == 0) {
				continue
			}
			if !explicit {
				want = name
			}
			if i, ok := idx[headerKey(want)]; ok && !used[i] {
				r.col[f], used[i] = i, true
				continue
			}
			r.col[f] = -1
			if explicit {
				missing = append(missing, fmt.Sprintf("%s (mapped to %q)", name, want))
				unmet[f] = true
			}
		}
	}
	need := func(label string, fields ...int) {
		for _, f := range fields {
			if r.col[f] >= 0 || unmet[f] {
				return
			}
		}
		missing = append(missing, label)
	}
	need("id", fID)
	need("date", fDate)
	need("an employee column (employee_id, employee_number, email or name)", fEmployeeID, fEmployeeNumber, fEmail, fName)
	need("a value column (hours, units, rate or amount)", fHours, fUnits, fRate, fAmount)
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: missing columns: %s (header: %s; map entry fields to your column names with the column options)",
			source, strings.Join(missing, ", "), strings.Join(rows.header, ", "))
	}
	for i, u := range used {
		if !u && rows.header[i] != "" {
			r.extras = append(r.extras, i)
		}
	}
	return r, nil
}

// Next returns the next entry, a *Problem for a bad row (reading goes on),
// io.EOF, or a fatal error.
func (r *csvReader) Next() (paysync.Entry, error) {
	rec, line, err := r.rows.next()
	if err != nil {
		if p, ok := err.(*Problem); ok && rec != nil {
			p.EntryID = r.cell(rec, fID)
		}
		return paysync.Entry{}, err
	}
	e, err := r.entry(rec, line)
	if err != nil {
		return paysync.Entry{}, err
	}
	return e, nil
}

func (r *csvReader) cell(rec []string, f int) string {
	if i := r.col[f]; i >= 0 && i < len(rec) {
		return strings.TrimSpace(rec[i])
	}
	return ""
}

func (r *csvReader) name(f int) string { return r.rows.header[r.col[f]] }

func (r *csvReader) entry(rec []string, line int) (paysync.Entry, error) {
	c := &r.cells
	e := paysync.Entry{Source: c.source, Line: line}
	e.ID = r.cell(rec, fID)
	if e.ID == "" {
		return e, c.problem(line, "", r.name(fID), "no id", "every row needs an id, unique within the file: it is the dedupe key")
	}
	e.CompanyID = r.cell(rec, fCompanyID)
	e.EmployeeID = r.cell(rec, fEmployeeID)
	e.EmployeeNumber = r.cell(rec, fEmployeeNumber)
	e.Email = r.cell(rec, fEmail)
	e.Name = r.cell(rec, fName)
	if e.EmployeeID == "" && e.EmployeeNumber == "" && e.Email == "" && e.Name == "" {
		return e, c.problem(line, e.ID, "employee", "no employee reference", "fill one of the employee columns (employee_id, employee_number, email or name)")
	}
	var err error
	if e.Date, err = c.date(line, e.ID, r.name(fDate), r.cell(rec, fDate)); err != nil {
		return e, err
	}
	if s := r.cell(rec, fHours); s != "" {
		if e.Hours, err = c.hours(line, e.ID, r.name(fHours), s); err != nil {
			return e, err
		}
	}
	for _, f := range [...]int{fUnits, fRate, fAmount} {
		s := r.cell(rec, f)
		if s == "" {
			continue
		}
		v, err := c.decimal(line, e.ID, r.name(f), s)
		if err != nil {
			return e, err
		}
		switch f {
		case fUnits:
			e.Units = v
		case fRate:
			e.Rate = v
		default:
			e.Amount = v
		}
	}
	if !e.Hours.Valid && !e.Units.Valid && !e.Rate.Valid && !e.Amount.Valid {
		return e, c.problem(line, e.ID, "hours", "no hours, units, rate or amount", "fill the hours column, or units, rate or amount")
	}
	e.Type = r.cell(rec, fType)
	e.Code = r.cell(rec, fCode)
	e.Project = r.cell(rec, fProject)
	e.Description = r.cell(rec, fDescription)
	e.Tags = splitTags(r.cell(rec, fTags))
	e.Billable = yesNo(&e, "billable", r.cell(rec, fBillable))
	e.Approved = yesNo(&e, "approved", r.cell(rec, fApproved))
	for _, i := range r.extras {
		if v := strings.TrimSpace(rec[i]); v != "" {
			if e.Fields == nil {
				e.Fields = make(map[string]string, len(r.extras))
			}
			e.Fields[r.rows.header[i]] = v
		}
	}
	return e, nil
}
