package mapping

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/encoding/charmap"
)

// Drafting a rules file (paysync rules init). Writing one by hand meant
// reading an export to learn which column is the type and which duration
// counts, and looking up payroll's ids: Draft does that from the exports
// themselves and what payroll says (its employees and pay_parts_meta),
// and writes it down with a comment on every line saying where it came
// from. What it cannot know, it guesses and marks GUESS:, in a way that
// keeps the draft from being used unread: a guessed code is written
// GUESS:T1, which Unconfirmed refuses; a rate payroll requires and the
// exports lack is GUESS:RATE, which is no value source with or without
// its marker (so a made-up value is never paid); a guessed date format is a commented-out line, so
// the dates fail to read until it is uncommented.

// GuessMarker marks a value Draft guessed: the operator confirms it by
// deleting the marker (or writes another value).
const GuessMarker = "GUESS:"

// DraftInput is one export to draft from.
type DraftInput struct {
	Name string // as given on the command line, for comments
	Data []byte
}

// DraftOptions is what Draft knows besides the exports: payroll's side.
type DraftOptions struct {
	Format      Format // FormatAuto: detected per input
	CompanyID   string
	CompanyName string
	Employees   []paysync.Employee
	Meta        []paysync.PayPartMeta // in the server's order
	RulesName   string                // the draft's file name in the closing command (default rules.yaml)
}

// DraftSummary counts what a draft holds, for the command's last line.
type DraftSummary struct {
	People, Unmatched, Rules, Guesses int
}

// Unconfirmed returns a problem for each rule whose code is still a
// guess of Draft (GUESS:T1), so that a draft is refused until its
// guesses are confirmed; nil when there is none.
func Unconfirmed(r *Rules) error {
	var probs []error
	for i, rule := range r.Rules {
		if code, ok := strings.CutPrefix(rule.Code, GuessMarker); ok {
			probs = append(probs, &Problem{Source: r.Source, Line: rule.Line, Field: fmt.Sprintf("rules[%d].code", i),
				Msg:  fmt.Sprintf("rule %q: code %s is a guess of paysync rules init, not confirmed", rule.Name, rule.Code),
				Hint: fmt.Sprintf("check it against paysync meta, then write code: %s (delete %q) or the right code", strings.TrimSpace(code), GuessMarker)})
		}
	}
	return errors.Join(probs...)
}

// Draft reads the exports as import would, with the reader settings it
// detects, and returns a commented rules file: the read: block, the
// people seen with their payroll match (or unmatched, with the closest
// names), and one rule per type (else tag, else project) seen with a
// proposed pay code. It sends nothing anywhere.
func Draft(inputs []DraftInput, o DraftOptions) ([]byte, DraftSummary, error) {
	var sniffs []*sniffed
	for _, in := range inputs {
		s, err := sniff(in, o.Format)
		if err != nil {
			return nil, DraftSummary{}, err
		}
		sniffs = append(sniffs, s)
	}
	d := &drafter{o: o, sniffs: sniffs}
	d.write()
	return []byte(d.b.String()), d.sum, nil
}

// ---- reading the exports ----

// sniffed is what one export showed.
type sniffed struct {
	name       string
	format     Format
	settings   []draftSetting // the read settings for the format, in order
	entries    []paysync.Entry
	rows       int // entries read and rows that failed
	problems   []string
	unitsCol   string // where hours come from, for the units comment
	typeCol    string // what is read as the type
	first, end string // date range
}

// draftSetting is one line of the read: block.
type draftSetting struct {
	key, value, note string
	guess            bool // written commented out, marked
	raw              bool // value written as it is (true, false)
	commentOnly      bool // no value: the note alone
}

var (
	commaNum = regexp.MustCompile(`^-?[0-9]+,[0-9]+$`)
	pointNum = regexp.MustCompile(`^-?[0-9]+\.[0-9]+$`)
	isoLike  = regexp.MustCompile(`^([0-9]{4})([-/.])([0-9]{1,2})([-/.])([0-9]{1,2})$`)
	dmyLike  = regexp.MustCompile(`^([0-9]{1,2})([-/.])([0-9]{1,2})([-/.])([0-9]{4})$`)
)

func sniff(in DraftInput, format Format) (*sniffed, error) {
	s := &sniffed{name: in.Name}
	f, err := checkFormat(format)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.Name, err)
	}
	body, bom := in.Data, false
	if b, ok := bytes.CutPrefix(body, []byte("\uFEFF")); ok {
		body, bom = b, true
	}
	text := body
	enc := draftSetting{key: settingEncoding.key, value: "auto", note: "detected: UTF-8"}
	if bom {
		enc.note = "detected: UTF-8 with a byte order mark"
	}
	if i := invalidUTF8(body); i >= 0 {
		line := 1 + bytes.Count(body[:i], []byte{'\n'})
		dec, err := charmap.Windows1252.NewDecoder().Bytes(body)
		if err != nil {
			return nil, fmt.Errorf("%s: decode as Windows-1252: %w", in.Name, err)
		}
		text = dec
		enc = draftSetting{key: settingEncoding.key, value: string(EncodingWindows1252),
			note: fmt.Sprintf("detected: line %d is not UTF-8 (byte 0x%02X), as in exports of older Windows tools", line, body[i])}
	} else {
		enc.note += "; auto also reads a Windows-1252 file, saying so"
	}
	br := bufio.NewReaderSize(bytes.NewReader(text), peekSize)
	c, found := firstByte(br)
	if !found {
		return nil, fmt.Errorf("%s: empty input: nothing to draft from", in.Name)
	}
	opts := ReadOptions{Format: f}
	if f == FormatAuto {
		switch c {
		case '[':
			f = FormatJSON
		case '{':
			f = detectJSONObjects(br)
		}
	}
	if f != FormatJSON && f != FormatNDJSON {
		header := peekLine(br)
		comma := detectDelimiter(header)
		if f == FormatAuto {
			f = detectPreset(header, comma)
		}
		opts.Delimiter = comma
		s.settings = append(s.settings, delimiterSetting(header, comma))
		if err := s.sniffCSV(text, f, comma, &opts); err != nil {
			return nil, err
		}
	}
	s.format = f
	opts.Format = f
	if enc.value != "auto" {
		opts.Encoding = EncodingWindows1252
	}
	s.settings = append(s.settings, enc)
	return s, s.read(in, opts)
}

func delimiterSetting(header []byte, comma rune) draftSetting {
	n := func(c byte) int { return bytes.Count(header, []byte{c}) }
	v := string(comma)
	if comma == '\t' {
		v = "tab"
	}
	return draftSetting{key: settingDelimiter.key, value: v,
		note: fmt.Sprintf("detected: the header has %d commas, %d semicolons, %d tabs", n(','), n(';'), n('\t'))}
}

// sniffCSV looks at the cells: the date format and the decimal comma.
func (s *sniffed) sniffCSV(text []byte, f Format, comma rune, opts *ReadOptions) error {
	cr := csv.NewReader(bytes.NewReader(text))
	cr.Comma, cr.LazyQuotes, cr.FieldsPerRecord = comma, true, -1
	recs, err := cr.ReadAll()
	if err != nil {
		return fmt.Errorf("%s: read as CSV: %w", s.name, err)
	}
	if len(recs) == 0 {
		return fmt.Errorf("%s: no header", s.name)
	}
	dateCol := -1
	want := "date"
	if spec := presets[f]; spec != nil {
		want = headerKey(spec.header(rDate))
		s.typeCol = spec.header(rTask)
		s.unitsCol = spec.header(rDuration)
		switch f {
		case FormatToggl:
			s.unitsCol += " (H:MM:SS)"
		case FormatClockify:
			s.unitsCol += " (Duration (decimal) where it is empty)"
		case FormatHarvest:
			s.unitsCol += " (not Hours Rounded)"
		}
	}
	for i, h := range recs[0] {
		if headerKey(h) == want {
			dateCol = i
		}
	}
	var dates []string
	commas, points := 0, 0
	var commaEx, pointEx string
	for _, rec := range recs[1:] {
		for i, cell := range rec {
			cell = strings.TrimSpace(cell)
			switch {
			case i == dateCol:
				if cell != "" {
					dates = append(dates, cell)
				}
			case commaNum.MatchString(cell):
				commas++
				commaEx = firstOf(commaEx, cell)
			case pointNum.MatchString(cell):
				points++
				pointEx = firstOf(pointEx, cell)
			}
		}
	}
	switch {
	case commas > 0 && points == 0:
		opts.DecimalComma = true
		s.settings = append(s.settings, draftSetting{key: settingDecimalComma.key, value: "true", raw: true,
			note: fmt.Sprintf("detected: %d numbers written with a comma (%s), none with a point", commas, commaEx)})
	case commas > 0:
		s.settings = append(s.settings, draftSetting{key: settingDecimalComma.key, value: "false", raw: true,
			note: fmt.Sprintf("numbers are written both ways (%s, %s): check the file", commaEx, pointEx)})
	case points > 0:
		s.settings = append(s.settings, draftSetting{key: settingDecimalComma.key, value: "false", raw: true,
			note: fmt.Sprintf("detected: numbers are written with a point (%s)", pointEx)})
	default:
		s.settings = append(s.settings, draftSetting{key: settingDecimalComma.key, value: "false", raw: true,
			note: "no decimal numbers seen"})
	}
	if dateCol < 0 {
		return nil
	}
	ds := dateSetting(f, dates)
	if !ds.commentOnly {
		opts.DateFormat = ds.value // a guess too: the draft's people and rules need the rows read
	}
	s.settings = append(s.settings, ds)
	return nil
}

// firstOf keeps the first example.
func firstOf(have, s string) string {
	if have != "" {
		return have
	}
	return s
}

// dateSetting tells the date format from the values seen: year first;
// or day and month, told apart by a value above 12 in one of them.
func dateSetting(f Format, dates []string) draftSetting {
	ds := draftSetting{key: settingDateFormat.key}
	if len(dates) == 0 {
		ds.commentOnly, ds.note = true, "no dates seen"
		return ds
	}
	var iso, other []string
	maxA, maxB, sep := 0, 0, ""
	var exA, exB string
	for _, d := range dates {
		if i := strings.IndexAny(d, "T "); i > 0 {
			d = d[:i] // a timestamp: its date
		}
		if m := isoLike.FindStringSubmatch(d); m != nil {
			iso = append(iso, d)
			continue
		}
		m := dmyLike.FindStringSubmatch(d)
		if m == nil {
			other = append(other, d)
			continue
		}
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[3])
		if sep == "" {
			sep = m[2]
		}
		if a > maxA {
			maxA, exA = a, d
		}
		if b > maxB {
			maxB, exB = b, d
		}
	}
	switch {
	case len(other) > 0:
		ds.commentOnly, ds.note = true, fmt.Sprintf("dates such as %q are not in a format paysync reads: set date_format (e.g. DD/MM/YYYY)", other[0])
	case sep == "" && f == FormatHarvest:
		ds.commentOnly, ds.note = true, fmt.Sprintf("every date is year-month-day (%s); Harvest's default also reads M/D/YYYY", iso[0])
	case sep == "":
		ds.value, ds.note = isoDate, fmt.Sprintf("detected: every date is year-month-day (%s)", iso[0])
	case maxA > 12 && maxB > 12:
		ds.commentOnly, ds.note = true, fmt.Sprintf("day and month disagree (%s, %s): check the file", exA, exB)
	case maxB > 12:
		ds.value, ds.note = "MM"+sep+"DD"+sep+"YYYY", fmt.Sprintf("detected: %s has the day second (a US format)", exB)
	case maxA > 12:
		ds.value, ds.note = "DD"+sep+"MM"+sep+"YYYY", fmt.Sprintf("detected: %s has the day first", exA)
	case f == FormatHarvest:
		ds.value, ds.note = "MM"+sep+"DD"+sep+"YYYY", fmt.Sprintf("detected: Harvest writes M/D/YYYY (%s)", dates[0])
	default:
		first := "DD" + sep + "MM" + sep + "YYYY"
		alt := "MM" + sep + "DD" + sep + "YYYY"
		if f == FormatClockify && sep == "/" {
			first, alt = alt, first
		}
		ds.value, ds.guess = first, true
		ds.note = fmt.Sprintf("no day above 12 seen (%s): uncomment this line if %s is right, else write date_format: %s", dates[0], first, alt)
	}
	if len(iso) > 0 && sep != "" && !ds.commentOnly {
		ds.note += fmt.Sprintf("; year-first dates (%s) are read too", iso[0])
	}
	return ds
}

// read reads the entries as import would.
func (s *sniffed) read(in DraftInput, opts ReadOptions) error {
	rd, _, err := NewReader(in.Name, bytes.NewReader(in.Data), opts)
	if err != nil {
		return err
	}
	for {
		e, err := rd.Next()
		var p *Problem
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &p):
			s.rows++
			if len(s.problems) < 3 {
				s.problems = append(s.problems, p.Error())
			}
			continue
		case err != nil:
			return err
		}
		s.rows++
		if e.Deleted {
			continue
		}
		s.entries = append(s.entries, e)
		if e.Date != "" && (s.first == "" || e.Date < s.first) {
			s.first = e.Date
		}
		if e.Date > s.end {
			s.end = e.Date
		}
	}
}

// ---- writing the draft ----

type drafter struct {
	o      DraftOptions
	sniffs []*sniffed
	b      strings.Builder
	sum    DraftSummary
}

// line writes text and, aligned, a comment.
func (d *drafter) line(text, comment string) {
	d.b.WriteString(text)
	if comment != "" {
		if text != "" {
			d.b.WriteString(strings.Repeat(" ", max(1, 36-utf8.RuneCountInString(text))))
		}
		d.b.WriteString("# ")
		d.b.WriteString(comment)
	}
	d.b.WriteByte('\n')
}

// yamlString is s as a YAML scalar, quoted where it must be.
func yamlString(s string) string {
	b, err := yaml.Marshal(s)
	if err != nil || bytes.Count(b, []byte{'\n'}) > 1 {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(string(b), "\n")
}

func hoursText(h paysync.Hours) string {
	if !h.Valid {
		return "0 h"
	}
	return h.Round(2, paysync.HalfUp).String() + " h"
}

func rowsText(n int) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

func (d *drafter) write() {
	o := d.o
	d.line("", "paysync rules file, drafted by `paysync rules init` from:")
	for _, s := range d.sniffs {
		span := ""
		if s.first != "" {
			span = ", " + s.first + ".." + s.end
		}
		d.line("", fmt.Sprintf("  %s: %s, %s%s", s.name, formatName(s.format), rowsText(s.rows), span))
		for _, p := range s.problems {
			d.line("", "    not read with the settings below: "+p)
		}
	}
	d.line("", fmt.Sprintf("and payroll company %s (%s): %d employees, %d pay codes.", o.CompanyID, o.CompanyName, len(o.Employees), len(o.Meta)))
	d.line("", "Check every line. Guesses are marked "+GuessMarker+" and this file is refused while")
	d.line("", "one is left: confirm a guess by deleting \""+GuessMarker+"\" (or write the right value);")
	d.line("", "in read:, a guessed line is commented out as #"+GuessMarker+" : uncomment it.")
	d.line("version: 1", "")
	if o.CompanyID != "" {
		d.line("company: "+yamlString(o.CompanyID), o.CompanyName)
	}
	d.b.WriteByte('\n')
	d.writeRead()
	d.b.WriteByte('\n')
	d.writePeople()
	d.b.WriteByte('\n')
	d.line("skip:", "")
	d.line("  unapproved: true", "entries with approved: false are not paid")
	d.line("  zero_hours: true", "")
	d.b.WriteByte('\n')
	d.writeRules()
	d.b.WriteByte('\n')
	name := o.RulesName
	if name == "" {
		name = "rules.yaml"
	}
	var files []string
	for _, s := range d.sniffs {
		files = append(files, s.name)
	}
	d.line("", "Next: see what the exports would become (nothing is sent), fix, repeat:")
	d.line("", "  paysync import --dry-run --rules "+name+" "+strings.Join(files, " "))
}

func formatName(f Format) string {
	if spec := presets[f]; spec != nil {
		return spec.name
	}
	return string(f)
}

func (d *drafter) writeRead() {
	d.line("read:", "how the exports are read (README \"Reader settings\"); flags and PAYSYNC_* variables override")
	done := map[Format]*sniffed{}
	for _, f := range Formats {
		for _, s := range d.sniffs {
			if s.format != f {
				continue
			}
			if first, ok := done[f]; ok {
				if !sameSettings(first.settings, s.settings) {
					d.line("", fmt.Sprintf("  NOTE: %s is read differently from %s: one block per format; check both", s.name, first.name))
				}
				continue
			}
			done[f] = s
			d.line("  "+string(f)+":", s.name)
			for _, st := range s.settings {
				switch {
				case st.commentOnly:
					d.b.WriteString("    # " + st.key + " not set: " + st.note + "\n")
				case st.guess:
					d.sum.Guesses++
					d.line("    #"+GuessMarker+" "+st.key+": "+yamlString(st.value), st.note)
				case st.raw:
					d.line("    "+st.key+": "+st.value, st.note)
				default:
					d.line("    "+st.key+": "+yamlString(st.value), st.note)
				}
			}
		}
	}
	d.b.WriteString("  # time_zone: Europe/Copenhagen    (the day of a timestamp with an offset; default UTC)\n")
}

func sameSettings(a, b []draftSetting) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || a[i].value != b[i].value || a[i].commentOnly != b[i].commentOnly {
			return false
		}
	}
	return true
}

// person is one person seen in the exports.
type draftPerson struct {
	name, email, number, employeeID string
	rows                            int
	hours                           paysync.Hours
}

func (p *draftPerson) key() string {
	switch {
	case p.employeeID != "":
		return "id:" + p.employeeID
	case p.email != "":
		return "e:" + fold(p.email)
	case p.number != "":
		return "n:" + p.number
	}
	return "m:" + fold(p.name)
}

// personMatch is a person's proposed payroll employee.
type personMatch struct {
	p     *draftPerson
	table string // by_number, by_email, by_name; "" when unmatched
	key   string
	emp   paysync.Employee
	why   string
}

func (d *drafter) people() []*draftPerson {
	byKey := map[string]*draftPerson{}
	var out []*draftPerson
	for _, s := range d.sniffs {
		for _, e := range s.entries {
			p := &draftPerson{name: e.Name, email: e.Email, number: e.EmployeeNumber, employeeID: e.EmployeeID}
			k := p.key()
			if have, ok := byKey[k]; ok {
				p = have
			} else {
				byKey[k] = p
				out = append(out, p)
			}
			p.rows++
			p.hours = p.hours.Add(e.Hours)
			if p.name == "" {
				p.name = e.Name
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return fold(out[i].name+out[i].email) < fold(out[j].name+out[j].email) })
	return out
}

// match proposes the payroll employee of p: payroll's number, then its
// e-mail, then the exact name, where every one p has must agree (as the
// mapper's automatic matching).
func (d *drafter) match(p *draftPerson) personMatch {
	m := personMatch{p: p}
	type hit struct {
		table, key, why string
		emp             paysync.Employee
	}
	var hits []hit
	find := func(eq func(paysync.Employee) bool) []paysync.Employee {
		var out []paysync.Employee
		for _, e := range d.o.Employees {
			if eq(e) {
				out = append(out, e)
			}
		}
		return out
	}
	var notes []string
	if n := strings.TrimSpace(p.number); n != "" {
		if es := find(func(e paysync.Employee) bool { return strings.TrimSpace(e.Number) == n }); len(es) == 1 {
			hits = append(hits, hit{"by_number", n, "payroll's employee number", es[0]})
		}
	}
	if p.email != "" {
		if es := find(func(e paysync.Employee) bool { return e.Email != "" && fold(e.Email) == fold(p.email) }); len(es) == 1 {
			hits = append(hits, hit{"by_email", strings.ToLower(strings.TrimSpace(p.email)), "payroll's e-mail", es[0]})
		}
	}
	if p.name != "" {
		es := find(func(e paysync.Employee) bool { return fold(e.Name) == fold(p.name) })
		switch {
		case len(es) == 1:
			hits = append(hits, hit{"by_name", p.name, "the exact name", es[0]})
		case len(es) > 1:
			notes = append(notes, fmt.Sprintf("%d payroll employees are named %q: %s", len(es), p.name, employeeIDs(es)))
		}
	}
	for _, h := range hits[min(1, len(hits)):] {
		if h.emp.ID != hits[0].emp.ID {
			m.why = fmt.Sprintf("the matches disagree: %s is %s (%s) but %s is %s (%s)", hits[0].why, hits[0].emp.Name, hits[0].emp.ID, h.why, h.emp.Name, h.emp.ID)
			return m
		}
	}
	if len(hits) == 0 {
		m.why = "no payroll number, e-mail or name matches"
		if len(notes) > 0 {
			m.why = strings.Join(notes, "; ")
		}
		return m
	}
	h := hits[0]
	m.table, m.key, m.emp, m.why = h.table, h.key, h.emp, h.why
	return m
}

func (d *drafter) writePeople() {
	people := d.people()
	d.line("employees:", "who is who (README \"Matching people\"); paysync employees lists payroll's people")
	d.line("  match_names: false", "true: people in none of the tables are found by their exact name in payroll")
	tables := map[string][]string{}
	var given []string
	for _, p := range people {
		d.sum.People++
		seen := fmt.Sprintf("%s, %s", rowsText(p.rows), hoursText(p.hours))
		if p.employeeID != "" {
			given = append(given, fmt.Sprintf("%s (payroll id %s on the entries): %s", p.name, p.employeeID, seen))
			continue
		}
		m := d.match(p)
		if m.table == "" {
			d.sum.Unmatched++
			table, key := "by_name", p.name
			switch {
			case p.number != "":
				table, key = "by_number", p.number
			case p.email != "":
				table, key = "by_email", strings.ToLower(p.email)
			}
			who := p.name
			if who == "" || who == key {
				who = "this person"
			}
			hint := ""
			if c := closest(p.name, d.o.Employees, 3); c != "" {
				hint = "; closest payroll names: " + c
			}
			tables[table] = append(tables[table], fmt.Sprintf("    # %s: PAYROLL_ID   # UNMATCHED %s, %s: %s%s; give the payroll id, or list it in ignore", yamlString(key), who, seen, m.why, hint))
			continue
		}
		no := ""
		if m.emp.Number != "" {
			no = " (no. " + m.emp.Number + ")"
		}
		text := "    " + yamlString(m.key) + ": " + yamlString(m.emp.ID)
		tables[m.table] = append(tables[m.table], padComment(text, fmt.Sprintf("%s%s: %s; %s", m.emp.Name, no, m.why, seen)))
	}
	for _, t := range []string{"by_number", "by_email", "by_name"} {
		if len(tables[t]) == 0 {
			continue
		}
		d.line("  "+t+":", "")
		for _, l := range tables[t] {
			d.b.WriteString(l)
			d.b.WriteByte('\n')
		}
	}
	for _, g := range given {
		d.line("", "  "+g)
	}
	d.line("  ignore: []", "people never paid through paysync: e-mails, names or numbers")
}

func padComment(text, comment string) string {
	return text + strings.Repeat(" ", max(1, 36-utf8.RuneCountInString(text))) + "# " + comment
}

// closest names up to n payroll employees whose names are nearest to name.
func closest(name string, emps []paysync.Employee, n int) string {
	if name == "" || len(emps) == 0 {
		return ""
	}
	type cand struct {
		e paysync.Employee
		d int
	}
	cs := make([]cand, 0, len(emps))
	for _, e := range emps {
		cs = append(cs, cand{e, editDistance(fold(name), fold(e.Name))})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, fmt.Sprintf("%s (%s)", c.e.Name, c.e.ID))
	}
	return strings.Join(out, ", ")
}

// editDistance is the Levenshtein distance of a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// draftValue is one value of the field that decides the pay code.
type draftValue struct {
	field, value         string // match key (type, tags, project), the value as first seen
	rows                 int
	hours                paysync.Hours
	withHours, withUnits int
	withRate, withAmount int
	units                decimal.Decimal // of the entries without hours
	fallback             bool            // the default rule: entries without the field
}

func (v *draftValue) add(e paysync.Entry) {
	v.rows++
	v.hours = v.hours.Add(e.Hours)
	if e.Hours.Valid {
		v.withHours++
	}
	if e.Units.Valid {
		v.withUnits++
		if !e.Hours.Valid {
			v.units = v.units.Add(e.Units.Decimal)
		}
	}
	if e.Rate.Valid {
		v.withRate++
	}
	if e.Amount.Valid {
		v.withAmount++
	}
}

// valueOf returns the entry's values of field.
func valueOf(e paysync.Entry, field string) []string {
	switch field {
	case "type":
		if e.Type != "" {
			return []string{e.Type}
		}
	case "project":
		if e.Project != "" {
			return []string{e.Project}
		}
	case "tags":
		return e.Tags
	}
	return nil
}

func (d *drafter) writeRules() {
	var entries []paysync.Entry
	ownCode := 0
	for _, s := range d.sniffs {
		for _, e := range s.entries {
			if e.Code != "" {
				ownCode++
				continue
			}
			entries = append(entries, e)
		}
	}
	field := ""
	for _, f := range []string{"type", "tags", "project"} {
		for _, e := range entries {
			if len(valueOf(e, f)) > 0 {
				field = f
				break
			}
		}
		if field != "" {
			break
		}
	}
	// Tags that name a kind of pay (overtime, sick, …) decide before the
	// field: one entry, the tag's code.
	var tagVals, vals []*draftValue
	idx := map[string]*draftValue{}
	get := func(list *[]*draftValue, f, v string) *draftValue {
		k := f + "\x00" + fold(v)
		if x, ok := idx[k]; ok {
			return x
		}
		x := &draftValue{field: f, value: v}
		idx[k] = x
		*list = append(*list, x)
		return x
	}
	var rest *draftValue
	for _, e := range entries {
		tagged := false
		if field != "tags" {
			for _, t := range e.Tags {
				if cat := category(t); cat != "" && cat != "normal" {
					get(&tagVals, "tags", t).add(e)
					tagged = true
					break
				}
			}
		}
		if tagged {
			continue
		}
		vs := valueOf(e, field)
		if field == "" || len(vs) == 0 {
			if rest == nil {
				rest = &draftValue{fallback: true, field: field}
			}
			rest.add(e)
			continue
		}
		get(&vals, field, vs[0]).add(e)
	}
	byHours := func(l []*draftValue) {
		sort.SliceStable(l, func(i, j int) bool {
			if c := l[i].hours.Seconds.Cmp(l[j].hours.Seconds); c != 0 {
				return c > 0
			}
			return l[i].rows > l[j].rows
		})
	}
	byHours(tagVals)
	byHours(vals)
	all := append(tagVals, vals...)
	if rest != nil {
		all = append(all, rest)
	}
	switch field {
	case "type":
		d.line("", "Rules: one per type seen (the Task column of Toggl, Clockify and Harvest exports; type in CSV")
		d.line("", "and JSON), most hours first, after the tags that name a kind of pay. Tried in order;")
		d.line("", "the first that matches decides. paysync meta lists the pay codes.")
	case "":
		d.line("", "Rules: the exports name no type, tag or project: one rule for every entry.")
	default:
		d.line("", "Rules: one per "+strings.TrimSuffix(field, "s")+" seen (the exports name no type), most hours first.")
		d.line("", "Tried in order; the first that matches decides. paysync meta lists the pay codes.")
	}
	if ownCode > 0 {
		d.line("", fmt.Sprintf("(%s carry their own code: no rule needed for them.)", rowsText(ownCode)))
	}
	d.line("rules:", "")
	units := d.unitsColumn()
	for _, v := range all {
		d.writeRule(v, units)
	}
}

// unitsColumn names where hours come from, for the units comment.
func (d *drafter) unitsColumn() string {
	var cols []string
	seen := map[string]bool{}
	for _, s := range d.sniffs {
		c := s.unitsCol
		if c == "" {
			c = "hours" // the entry field, as CSV and JSON name it
		}
		if !seen[c] {
			seen[c] = true
			cols = append(cols, c)
		}
	}
	return "hours, from the column " + strings.Join(cols, "; ")
}

func (d *drafter) writeRule(v *draftValue, unitsCol string) {
	d.sum.Rules++
	meta, why := d.guessCode(v)
	seen := fmt.Sprintf("%s, %s", rowsText(v.rows), hoursText(v.hours))
	if !v.hours.Valid && !v.units.IsZero() {
		seen = fmt.Sprintf("%s, %s units", rowsText(v.rows), v.units)
	}
	if v.fallback {
		d.line("  - name: everything else", "")
		what := "a type, tag or project"
		if v.field != "" {
			what = "a " + strings.TrimSuffix(v.field, "s")
		}
		d.line("    default: true", seen+" without "+what)
	} else {
		name := v.value
		if v.field == "tags" {
			name += " (tag)"
		}
		d.line("  - name: "+yamlString(name), "")
		d.line("    match:", "")
		d.line("      "+v.field+": "+yamlString(v.value), seen)
	}
	if meta.Code == "" {
		d.line("    code: "+GuessMarker+"CODE", "GUESS: payroll lists no pay codes: write one")
		d.sum.Guesses++
		return
	}
	d.sum.Guesses++
	d.line("    code: "+yamlString(GuessMarker+meta.Code), fmt.Sprintf("GUESS: %s %s: %s", meta.Code, meta.Description, why))
	wrote := false
	if meta.Units != paysync.RuleForbidden {
		switch {
		case v.withHours == 0 && v.withUnits > 0:
			d.line("    units: {field: units}", "the units column")
			wrote = true
		case v.withHours > 0 || meta.Units == paysync.RuleMandatory:
			d.line("    units: hours", unitsCol)
			wrote = true
		}
	}
	for _, f := range []struct {
		key  string
		rule paysync.FieldRule
		have int
	}{{"rate", meta.Rate, v.withRate}, {"amount", meta.Amount, v.withAmount}} {
		switch {
		case f.rule == paysync.RuleForbidden:
		case f.have > 0:
			d.line("    "+f.key+": {field: "+f.key+"}", "the "+f.key+" column")
			wrote = true
		case f.rule == paysync.RuleMandatory:
			d.sum.Guesses++
			// A placeholder that loads neither with the marker nor without
			// it: a made-up 0 would pay nothing, silently.
			d.line("    "+f.key+": "+GuessMarker+strings.ToUpper(f.key), fmt.Sprintf("GUESS: payroll requires a %s for %s and the exports have none: write the %s (a number, or {field: NAME})", f.key, meta.Code, f.key))
			wrote = true
		}
	}
	if !wrote {
		d.line("    units: hours", unitsCol)
	}
}

// The kinds of pay a value or a pay code's description may name, by
// words in either (lower case; a value's word ending in * matches as a
// prefix).
var payKinds = []struct {
	kind  string
	value []string // words of a type, tag or project
	code  []string // words of a code's description
}{
	{"overtime", []string{"overtime", "overtid", "over time", "ot"}, []string{"overtid", "overtime"}},
	{"sick", []string{"sick", "syg*", "illness"}, []string{"syg", "sick"}},
	{"vacation", []string{"vacation", "holiday*", "ferie*", "leave", "time off", "pto"}, []string{"ferie", "vacation", "holiday", "days off"}},
	{"mileage", []string{"mileage", "km", "kørsel", "driving", "kilomet*"}, []string{"kørsel", "mileage", "km"}},
	{"supplement", []string{"evening", "aften*", "night*", "nat", "weekend"}, []string{"tillæg", "supplement"}},
	{"bonus", []string{"bonus"}, []string{"bonus"}},
	{"per diem", []string{"per diem", "diæt*"}, []string{"diæt", "per diem"}},
}

// category is the kind of pay a value names, "normal" for none.
func category(v string) string {
	f := fold(v)
	words := strings.FieldsFunc(f, func(r rune) bool { return r == ' ' || r == '-' || r == '_' || r == '/' || r == ',' })
	for _, k := range payKinds {
		for _, w := range k.value {
			if strings.Contains(w, " ") {
				if strings.Contains(f, w) {
					return k.kind
				}
				continue
			}
			prefix, isPrefix := strings.CutSuffix(w, "*")
			for _, x := range words {
				if x == w || (isPrefix && strings.HasPrefix(x, prefix)) {
					return k.kind
				}
			}
		}
	}
	return "normal"
}

// guessCode proposes a pay code for v from pay_parts_meta: one whose
// description names the kind of pay v names, else the ordinary hours code.
func (d *drafter) guessCode(v *draftValue) (paysync.PayPartMeta, string) {
	kind := "normal"
	if !v.fallback {
		kind = category(v.value)
	}
	if kind != "normal" {
		for _, k := range payKinds {
			if k.kind != kind {
				continue
			}
			for _, m := range d.o.Meta {
				desc := strings.ToLower(m.Description + " " + m.Code)
				for _, w := range k.code {
					if strings.Contains(desc, w) {
						return m, fmt.Sprintf("%q reads as %s", v.value, kind)
					}
				}
			}
		}
	}
	m := d.ordinary()
	if v.fallback {
		return m, "the ordinary hours code"
	}
	if kind != "normal" {
		return m, fmt.Sprintf("%q reads as %s, but no pay code says so: the ordinary hours code", v.value, kind)
	}
	return m, "the ordinary hours code"
}

// ordinary is the code for ordinary hours: one whose description says
// hourly wage, else the first that takes units without needing a rate or
// an amount.
func (d *drafter) ordinary() paysync.PayPartMeta {
	for _, m := range d.o.Meta {
		desc := strings.ToLower(m.Description)
		for _, w := range []string{"timeløn", "hourly", "normal", "ordinary", "regular"} {
			if strings.Contains(desc, w) && m.Units != paysync.RuleForbidden {
				return m
			}
		}
	}
	for _, m := range d.o.Meta {
		if m.Units == paysync.RuleMandatory && m.Rate != paysync.RuleMandatory && m.Amount != paysync.RuleMandatory {
			return m
		}
	}
	if len(d.o.Meta) > 0 {
		return d.o.Meta[0]
	}
	return paysync.PayPartMeta{}
}
