package mapping

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// The canonical entry in JSON: see schema/entry.schema.json, which states
// the same rules as decodeEntry. Numbers are read from their text into
// exact decimals, never through float64.

// jsonPair is one property of an entry object, in document order.
type jsonPair struct {
	key    string
	val    json.RawMessage
	nested bool // an object or array already skipped (only for "entries")
}

// jsonReader reads JSON: one entry object, several (concatenated or
// pretty-printed), an array of entries, or {"entries": [...]}. Arrays are
// streamed element by element.
type jsonReader struct {
	source string
	guard  *inputGuard
	count  *lineCounter
	dec    *json.Decoder
	state  int
	record int // elements of arrays read so far
	pairs  []jsonPair
	zone   *time.Location // the date of a "start" timestamp
	err    error
}

const (
	jsonTop         = iota // between top-level values
	jsonArray              // in a top-level array of entries
	jsonWrapper            // in the "entries" array of a wrapper
	jsonWrapperRest        // in a wrapper, after its entries
)

func newJSONReader(source string, g *inputGuard, br *bufio.Reader, zone *time.Location) *jsonReader {
	c := &lineCounter{r: br}
	dec := json.NewDecoder(c)
	dec.UseNumber()
	return &jsonReader{source: source, guard: g, count: c, dec: dec, zone: zone}
}

// lineCounter counts the newlines handed to the JSON decoder, so that the
// line of its read position can be told.
type lineCounter struct {
	r  io.Reader
	nl int
}

func (c *lineCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.nl += bytes.Count(p[:n], []byte{'\n'})
	return n, err
}

// line returns the line of the decoder's read position.
func (r *jsonReader) line() int {
	ahead := 0
	buf := r.dec.Buffered()
	var b [512]byte
	for {
		n, err := buf.Read(b[:])
		ahead += bytes.Count(b[:n], []byte{'\n'})
		if err != nil {
			break
		}
	}
	return 1 + r.count.nl - ahead
}

func (r *jsonReader) fatal(err error) error {
	switch {
	case errors.Is(err, errRecordTooLarge):
		err = fmt.Errorf("%s: line %d: a JSON value larger than %s", r.source, r.line(), sizeText(maxRecordBytes))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("%s: line %d: unexpected end of JSON input", r.source, r.line())
	default:
		var se *json.SyntaxError
		if errors.As(err, &se) {
			err = fmt.Errorf("%s: line %d: invalid JSON: %v", r.source, r.line(), se)
		} else {
			err = fmt.Errorf("%s: %w", r.source, err)
		}
	}
	r.err = err
	return err
}

// Next returns the next entry, a *Problem for an entry with bad fields, or
// a fatal error when the JSON itself is broken (it cannot be resynced).
func (r *jsonReader) Next() (paysync.Entry, error) {
	if r.err != nil {
		return paysync.Entry{}, r.err
	}
	r.guard.reset()
	for {
		switch r.state {
		case jsonTop:
			tok, err := r.dec.Token()
			if err == io.EOF {
				r.err = io.EOF
				return paysync.Entry{}, io.EOF
			}
			if err != nil {
				return paysync.Entry{}, r.fatal(err)
			}
			switch tok {
			case json.Delim('['):
				r.state = jsonArray
				continue
			case json.Delim('{'):
				e, entry, err := r.topObject(r.line())
				if err != nil || entry {
					return e, err
				}
				continue
			}
			return paysync.Entry{}, &Problem{Source: r.source, Line: r.line(), Msg: "a top-level value is not an entry object",
				Hint: "write entry objects, an array of them, or {\"entries\": [...]}"}
		case jsonArray, jsonWrapper:
			if !r.dec.More() {
				if _, err := r.dec.Token(); err != nil {
					return paysync.Entry{}, r.fatal(err)
				}
				if r.state == jsonArray {
					r.state = jsonTop
				} else {
					r.state = jsonWrapperRest
				}
				continue
			}
			var raw json.RawMessage
			if err := r.dec.Decode(&raw); err != nil {
				return paysync.Entry{}, r.fatal(err)
			}
			r.record++
			pairs, err := objectPairs(raw, r.pairs)
			if pairs != nil {
				r.pairs = pairs
			}
			if err != nil {
				return paysync.Entry{}, &Problem{Source: r.source, Line: r.record, Record: true, Msg: err.Error(),
					Hint: "each element must be one entry object"}
			}
			return decodeEntry(pairs, r.source, r.record, true, r.zone)
		case jsonWrapperRest:
			tok, err := r.dec.Token()
			if err != nil {
				return paysync.Entry{}, r.fatal(err)
			}
			if tok == json.Delim('}') {
				r.state = jsonTop
				continue
			}
			var skip json.RawMessage // another property of the wrapper
			if err := r.dec.Decode(&skip); err != nil {
				return paysync.Entry{}, r.fatal(err)
			}
		}
	}
}

// topObject reads a top-level object after its '{': an entry (entry
// true), or the start of a wrapper whose "entries" array comes next.
func (r *jsonReader) topObject(line int) (e paysync.Entry, entry bool, err error) {
	var pairs []jsonPair
	for {
		tok, err := r.dec.Token()
		if err != nil {
			return paysync.Entry{}, false, r.fatal(err)
		}
		if tok == json.Delim('}') {
			e, err := decodeEntry(pairs, r.source, line, false, r.zone)
			return e, true, err
		}
		key, _ := tok.(string)
		if key != "entries" {
			var raw json.RawMessage
			if err := r.dec.Decode(&raw); err != nil {
				return paysync.Entry{}, false, r.fatal(err)
			}
			pairs = append(pairs, jsonPair{key: key, val: raw})
			continue
		}
		// Peek at the value of "entries" by its first token.
		vt, err := r.dec.Token()
		if err != nil {
			return paysync.Entry{}, false, r.fatal(err)
		}
		switch vt {
		case json.Delim('['):
			r.state = jsonWrapper // a wrapper: what came before is metadata
			return paysync.Entry{}, false, nil
		case json.Delim('{'):
			if err := skipRest(r.dec); err != nil {
				return paysync.Entry{}, false, r.fatal(err)
			}
			pairs = append(pairs, jsonPair{key: key, nested: true})
		default:
			raw, _ := json.Marshal(vt) // a scalar: json.Number marshals as its text
			pairs = append(pairs, jsonPair{key: key, val: raw})
		}
	}
}

// skipRest consumes the rest of an object or array whose opening
// delimiter was just read.
func skipRest(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// objectPairs splits one JSON object into its properties, appended to
// pairs[:0]. Values are slices of raw. Anything but one object (with
// white space around) is an error.
func objectPairs(raw []byte, pairs []jsonPair) ([]jsonPair, error) {
	if !json.Valid(raw) {
		var v json.RawMessage
		return nil, jsonErr(json.Unmarshal(raw, &v))
	}
	// raw is valid JSON from here on, so the scan needs no checks.
	i := skipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	i++
	pairs = pairs[:0]
	for {
		i = skipSpace(raw, i)
		switch raw[i] {
		case '}':
			return pairs, nil
		case ',':
			i = skipSpace(raw, i+1)
		}
		end := stringEnd(raw, i)
		key := propertyName(raw[i:end])
		i = skipSpace(raw, end) + 1 // the colon
		i = skipSpace(raw, i)
		end = valueEnd(raw, i)
		pairs = append(pairs, jsonPair{key: key, val: raw[i:end]})
		i = end
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index after the valid JSON string at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
}

// valueEnd returns the index after the valid JSON value at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
		j++
	}
	return j
}

// propertyName returns a property name from its JSON string, without
// allocating for the entry's own names.
func propertyName(quoted []byte) string {
	name := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		_ = json.Unmarshal(quoted, &s)
		return s
	}
	if f := fieldIndexBytes(name); f >= 0 {
		return fieldNames[f]
	}
	switch string(name) {
	case "fields":
		return "fields"
	case "deleted":
		return "deleted"
	}
	return string(name)
}

func jsonErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of the object")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// ndjsonReader reads one entry object per line.
type ndjsonReader struct {
	source string
	guard  *inputGuard
	br     *bufio.Reader
	line   int
	buf    []byte // a line longer than the read buffer
	pairs  []jsonPair
	zone   *time.Location
	err    error
}

func newNDJSONReader(source string, g *inputGuard, br *bufio.Reader, zone *time.Location) *ndjsonReader {
	return &ndjsonReader{source: source, guard: g, br: br, zone: zone}
}

// Next returns the next entry; a line that is not an entry object is a
// *Problem and reading goes on with the next line. Blank lines are skipped.
func (r *ndjsonReader) Next() (paysync.Entry, error) {
	if r.err != nil {
		return paysync.Entry{}, r.err
	}
	for {
		r.guard.reset()
		line, err := r.readLine()
		if err != nil && (err != io.EOF || len(line) == 0) {
			if errors.Is(err, errRecordTooLarge) {
				err = fmt.Errorf("%s:%d: line larger than %s", r.source, r.line, sizeText(maxRecordBytes))
			} else if err != io.EOF {
				err = fmt.Errorf("%s: %w", r.source, err)
			}
			r.err = err
			return paysync.Entry{}, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		pairs, perr := objectPairs(line, r.pairs)
		if pairs != nil {
			r.pairs = pairs
		}
		if perr != nil {
			return paysync.Entry{}, &Problem{Source: r.source, Line: r.line, Msg: perr.Error(),
				Hint: "each line must be one complete JSON entry object"}
		}
		return decodeEntry(pairs, r.source, r.line, false, r.zone)
	}
}

// readLine returns the next line without its '\n'. The slice is valid
// until the next call.
func (r *ndjsonReader) readLine() ([]byte, error) {
	r.line++
	b, err := r.br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return bytes.TrimSuffix(b, []byte{'\n'}), err
	}
	r.buf = append(r.buf[:0], b...)
	for err == bufio.ErrBufferFull {
		b, err = r.br.ReadSlice('\n')
		r.buf = append(r.buf, b...)
	}
	if cap(r.buf) > 1<<20 {
		defer func() { r.buf = nil }() // do not keep a huge buffer for short lines
	}
	return bytes.TrimSuffix(r.buf, []byte{'\n'}), err
}

// The entry fields, as JSON property names and CSV field names.
const (
	fID = iota
	fCompanyID
	fEmployeeID
	fEmployeeNumber
	fEmail
	fName
	fDate
	fHours
	fUnits
	fRate
	fAmount
	fType
	fCode
	fProject
	fTags
	fBillable
	fApproved
	fDescription
	numFields
)

var fieldNames = [numFields]string{
	"id", "company_id", "employee_id", "employee_number", "email", "name", "date", "hours",
	"units", "rate", "amount", "type", "code", "project", "tags", "billable", "approved", "description",
}

func fieldIndex(name string) int {
	for i, n := range fieldNames {
		if n == name {
			return i
		}
	}
	return -1
}

func fieldIndexBytes(name []byte) int {
	for i, n := range fieldNames {
		if n == string(name) {
			return i
		}
	}
	return -1
}

// isoLayout reads JSON dates: exactly YYYY-MM-DD, as the published entry
// schema says (the unpadded lenience is for the CSV exports of tools).
var isoLayout = strictLayout(isoDate)

// decodeEntry makes an entry of the properties of one JSON object. The
// first bad property, in document order, is the Problem; then the
// required ones are checked: all of them for an entry, only the id for a
// tombstone ("deleted": true), which names the entry it removes.
func decodeEntry(pairs []jsonPair, source string, line int, record bool, zone *time.Location) (paysync.Entry, error) {
	e, err := entryOf(pairs, source, line, record, zone)
	if err != nil {
		return paysync.Entry{}, err
	}
	return e, nil
}

func entryOf(pairs []jsonPair, source string, line int, record bool, zone *time.Location) (paysync.Entry, error) {
	e := paysync.Entry{Source: source, Line: line}
	prob := func(field, msg, hint string) error {
		return &Problem{Source: source, Line: line, Record: record, EntryID: e.ID, Field: field, Msg: msg, Hint: hint}
	}
	pairs = lastWins(pairs)
	// The id first, so that every problem can name the entry.
	for _, p := range pairs {
		if p.key == "id" {
			if s, ok := jsonString(p.val); ok {
				e.ID = s
			}
		}
	}
	for _, p := range pairs {
		if p.nested {
			return e, prob(p.key, "an object is not allowed here", "entry properties other than tags and fields must be a string, number, boolean or null")
		}
		if string(p.val) == "null" {
			continue // absent, as Go encoders write empty pointers and decimals
		}
		f := fieldIndex(p.key)
		switch f {
		case fID, fCompanyID, fEmployeeID, fEmployeeNumber, fEmail, fName, fDate, fType, fCode, fProject, fDescription:
			s, ok := jsonString(p.val)
			if !ok {
				return e, prob(p.key, "must be a string", "write it in double quotes")
			}
			switch f {
			case fID:
				e.ID = s
			case fCompanyID:
				e.CompanyID = s
			case fEmployeeID:
				e.EmployeeID = s
			case fEmployeeNumber:
				e.EmployeeNumber = s
			case fEmail:
				e.Email = s
			case fName:
				e.Name = s
			case fDate:
				d, ok := isoLayout.parse(s)
				if !ok {
					return e, prob(p.key, fmt.Sprintf("%q is not a date", s), "write a real date as YYYY-MM-DD")
				}
				e.Date = d
			case fType:
				e.Type = s
			case fCode:
				e.Code = s
			case fProject:
				e.Project = s
			case fDescription:
				e.Description = s
			}
		case fHours:
			h, err := jsonHours(p.val)
			if err != nil {
				return e, prob(p.key, err.Error(), "write decimal hours (7.5 or \"7.5\") or a duration \"H:MM\" or \"H:MM:SS\"")
			}
			e.Hours = h
		case fUnits, fRate, fAmount:
			d, err := jsonDecimal(p.val)
			if err != nil {
				return e, prob(p.key, err.Error(), "write a number (12.5) or a decimal string (\"12.5\")")
			}
			v := decimal.NullDecimal{Decimal: d, Valid: true}
			switch f {
			case fUnits:
				e.Units = v
			case fRate:
				e.Rate = v
			default:
				e.Amount = v
			}
		case fTags:
			var tags []string
			if p.val[0] != '[' || json.Unmarshal(p.val, &tags) != nil {
				return e, prob(p.key, "must be an array of strings", `write e.g. ["overtime", "onsite"]`)
			}
			e.Tags = tags
		case fBillable, fApproved:
			b, ok := jsonBool(p.val)
			if !ok {
				return e, prob(p.key, "must be true or false", "write a JSON boolean, without quotes")
			}
			if f == fBillable {
				e.Billable = &b
			} else {
				e.Approved = &b
			}
		default:
			if p.key == "deleted" {
				// Not an entry field in fieldNames: a CSV column named
				// "deleted" stays a further field.
				b, ok := jsonBool(p.val)
				if !ok {
					return e, prob(p.key, "must be true or false", "write a JSON boolean, without quotes: true makes the object a tombstone")
				}
				e.Deleted = b
				continue
			}
			if p.key == "fields" {
				if p.val[0] != '{' {
					return e, prob(p.key, "must be an object", `write e.g. "fields": {"km": 12}`)
				}
				// Entry's own JSON form: further fields as an object.
				sub, err := objectPairs(p.val, nil)
				if err != nil {
					return e, prob(p.key, err.Error(), "")
				}
				for _, q := range lastWins(sub) {
					if err := setField(&e, q); err != nil {
						return e, prob(p.key+"."+q.key, err.Error(), "fields must hold strings, numbers or booleans")
					}
				}
				continue
			}
			if err := setField(&e, p); err != nil {
				return e, prob(p.key, err.Error(), "further properties must be a string, number or boolean: flatten it, or leave it out")
			}
		}
	}
	if e.Date == "" && !e.Deleted {
		// No date: the day of "start", a timestamp, in the time zone.
		if s, ok := e.Fields["start"]; ok {
			d, ok := zonedDate(s, zone)
			if !ok {
				return e, prob("start", fmt.Sprintf("%q is not a time with a UTC offset, such as 2026-11-02T23:30:00Z, to take the date from", s),
					"add \"date\": \"YYYY-MM-DD\", or write start in RFC 3339 with its offset")
			}
			e.Date = d
		}
	}
	if e.Deleted {
		if e.ID == "" {
			return e, prob("id", "a tombstone without an id", `a tombstone names the entry it removes: {"id": "...", "deleted": true}`)
		}
		return e, nil
	}
	switch {
	case e.ID == "":
		return e, prob("id", "no id", "every entry needs a non-empty \"id\", unique within its source: it is the dedupe key")
	case e.Date == "":
		return e, prob("date", "no date", "add \"date\": \"YYYY-MM-DD\"")
	case e.EmployeeID == "" && e.EmployeeNumber == "" && e.Email == "" && e.Name == "":
		return e, prob("employee", "no employee reference", "add one of employee_id, employee_number, email or name")
	case !e.Hours.Valid && !e.Units.Valid && !e.Rate.Valid && !e.Amount.Valid:
		return e, prob("hours", "no hours, units, rate or amount", "add \"hours\", or explicit \"units\", \"rate\" or \"amount\"")
	}
	return e, nil
}

// lastWins drops properties that a later one of the same name replaces,
// as encoding/json and the JSON Schema validators read duplicates.
func lastWins(pairs []jsonPair) []jsonPair {
	dup := false
	if len(pairs) <= 32 {
		for i := 1; i < len(pairs) && !dup; i++ {
			for j := 0; j < i; j++ {
				if pairs[i].key == pairs[j].key {
					dup = true
					break
				}
			}
		}
	} else {
		seen := make(map[string]bool, len(pairs))
		for _, p := range pairs {
			dup = dup || seen[p.key]
			seen[p.key] = true
		}
	}
	if !dup {
		return pairs
	}
	last := make(map[string]int, len(pairs))
	for i, p := range pairs {
		last[p.key] = i
	}
	kept := make([]jsonPair, 0, len(last))
	for i, p := range pairs {
		if last[p.key] == i {
			kept = append(kept, p)
		}
	}
	return kept
}

// setField keeps a further scalar property in Entry.Fields as text.
func setField(e *paysync.Entry, p jsonPair) error {
	var text string
	switch c := p.val[0]; {
	case c == '"':
		text, _ = jsonString(p.val)
	case c == 't' || c == 'f':
		text = string(p.val)
	case c == 'n':
		return nil
	case c == '{' || c == '[':
		return errors.New("a nested object or array is not allowed here")
	default:
		text = string(p.val) // a number, as written
	}
	if e.Fields == nil {
		e.Fields = make(map[string]string)
	}
	e.Fields[p.key] = text
	return nil
}

func jsonString(v json.RawMessage) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v[1:len(v)-1], '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

func jsonBool(v json.RawMessage) (bool, bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// jsonDecimal reads a JSON number from its text, or a decimal string
// (-?digits[.digits]).
func jsonDecimal(v json.RawMessage) (decimal.Decimal, error) {
	if s, ok := jsonString(v); ok {
		if !isDecimalText(s) {
			return decimal.Decimal{}, fmt.Errorf("%q is not a decimal number", s)
		}
		return decimal.NewFromString(s)
	}
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return decimal.Decimal{}, errors.New("must be a number or a decimal string")
	}
	d, err := decimal.NewFromString(string(v))
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("number %s is out of range", v)
	}
	return d, nil
}

// jsonHours reads hours: a JSON number or decimal string of hours, or a
// duration string "H:MM" or "H:MM:SS".
func jsonHours(v json.RawMessage) (paysync.Hours, error) {
	if s, ok := jsonString(v); ok && strings.Contains(s, ":") {
		if !isClockText(s) {
			return paysync.Hours{}, fmt.Errorf("%q is not a duration H:MM or H:MM:SS", s)
		}
		return paysync.ParseHours(s, false)
	}
	d, err := jsonDecimal(v)
	if err != nil {
		return paysync.Hours{}, err
	}
	return paysync.HoursFromDecimal(d), nil
}

// isDecimalText matches ^-?[0-9]+(\.[0-9]+)?$, the schema's decimal string.
func isDecimalText(s string) bool {
	s = strings.TrimPrefix(s, "-")
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != '.' || i+1 == len(s) {
		return false
	}
	for _, c := range []byte(s[i+1:]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isClockText matches ^-?[0-9]{1,9}:[0-5][0-9](:[0-5][0-9])?$, the
// schema's duration string.
func isClockText(s string) bool {
	s = strings.TrimPrefix(s, "-")
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 9 {
		return false
	}
	s = s[i:]
	for k := 0; k < 2 && s != ""; k++ {
		if len(s) < 3 || s[0] != ':' || s[1] < '0' || s[1] > '5' || s[2] < '0' || s[2] > '9' {
			return false
		}
		s = s[3:]
	}
	return s == ""
}
