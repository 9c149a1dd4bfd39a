package mapping

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// peekSize is the read buffer, and so the most detection looks at.
const peekSize = 64 << 10

// maxRecordBytes caps the input one Next call may consume, so that a
// broken file (an unbalanced quote, a line without end) fails instead of
// filling memory. A variable so tests can lower it.
var maxRecordBytes int64 = 16 << 20

var errRecordTooLarge = errors.New("record too large")

// NewReader returns a streaming reader of the entries in r, and the
// format it reads. source names the input in entries and problems (a file
// name, or "-" for stdin).
//
// With opts.Format == FormatAuto the format is detected from the first
// bytes after an optional UTF-8 byte order mark: '[' is a JSON array; '{'
// is a JSON {"entries": [...]} wrapper when its first key is "entries"
// (or the one-line object holds an "entries" array), NDJSON when the first
// object ends on its first line, and JSON objects (pretty-printed,
// possibly several) otherwise; anything else is CSV, recognised as a
// Toggl, Clockify or Harvest export by its header, and generic CSV
// otherwise. The CSV delimiter, unless set, is the most frequent of
// comma, semicolon and tab in the header line.
//
// The reader holds one record in memory at a time (the presets also keep
// 8 bytes per distinct row, to number repeated rows). An error returned
// here (unknown format, unreadable input, a header without required
// columns) is fatal and names the source.
func NewReader(source string, r io.Reader, opts ReadOptions) (Reader, Format, error) {
	format, err := checkFormat(opts.Format)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	auto := format == FormatAuto
	g := &inputGuard{r: r}
	size := peekSize
	if l, ok := r.(interface{ Len() int }); ok && l.Len() < size {
		// A small in-memory input (a NATS message): a buffer larger than
		// it would be allocated and cleared for nothing, per message.
		size = max(16, l.Len()+1)
	}
	br := bufio.NewReaderSize(g, size)
	bom := false
	if b, err := br.Peek(3); err == nil && string(b) == "\uFEFF" {
		_, _ = br.Discard(3)
		bom = true
	}
	first, found := firstByte(br)
	if _, err := br.Peek(1); err != nil && err != io.EOF {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	empty := !found && br.Buffered() < br.Size() // nothing but white space
	if auto {
		switch {
		case empty:
			return nil, "", fmt.Errorf("%s: empty input: nothing to detect the format from", source)
		case !found:
			return nil, "", fmt.Errorf("%s: only white space in the first %d KiB: nothing to detect the format from", source, peekSize>>10)
		case first == '[':
			format = FormatJSON
		case first == '{':
			format = detectJSONObjects(br)
		default:
			// A tool's export is told by its header, whose names are
			// ASCII in every encoding read here.
			header := peekLine(br)
			comma := opts.Delimiter
			if comma == 0 {
				comma = detectDelimiter(header)
			}
			format = FormatCSV
			if validDelimiter(comma) {
				format = detectPreset(header, comma)
			}
		}
	}
	// The settings for this format (the rules' read: block for it), then
	// the text as UTF-8.
	opts = opts.ForFormat(format)
	br, note, err := decodeInput(br, opts.Encoding, bom, size)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	var rd Reader
	switch format {
	case FormatJSON:
		if empty {
			return nil, "", fmt.Errorf("%s: empty input: want a JSON object or array", source)
		}
		rd = newJSONReader(source, g, br, opts.zone())
	case FormatNDJSON:
		rd = newNDJSONReader(source, g, br, opts.zone())
	default:
		comma := opts.Delimiter
		if comma == 0 {
			comma = detectDelimiter(peekLine(br))
		}
		if !validDelimiter(comma) {
			return nil, "", fmt.Errorf("%s: delimiter %q cannot separate CSV fields (set it with %s)", source, comma, settingDelimiter)
		}
		if format == FormatCSV {
			rd, err = newCSVReader(source, g, br, comma, opts)
		} else {
			rd, err = newPresetReader(format, source, g, br, comma, opts)
		}
		if err != nil {
			return nil, "", err
		}
	}
	if note != "" {
		rd = notedReader{rd, []string{source + ": " + note}}
	}
	return rd, format, nil
}

// notedReader is a reader with notes for the report (Noter).
type notedReader struct {
	Reader
	notes []string
}

func (r notedReader) Notes() []string { return r.notes }

// checkFormat normalises a format name and refuses unknown ones.
func checkFormat(f Format) (Format, error) {
	n := Format(strings.ToLower(strings.TrimSpace(string(f))))
	if n == FormatAuto {
		return n, nil
	}
	for _, k := range Formats {
		if n == k {
			return n, nil
		}
	}
	names := make([]string, len(Formats))
	for i, k := range Formats {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown format %q: want one of %s (or empty to detect)", string(f), strings.Join(names, ", "))
}

// peekUntil peeks ever more of br until done is satisfied, the buffer is
// full or the input ends, without consuming anything. It reads no more
// than it needs, so a slow stdin is not waited on for a whole buffer.
func peekUntil(br *bufio.Reader, done func([]byte) bool) []byte {
	n := 1
	for {
		b, err := br.Peek(n)
		if done(b) || err != nil || len(b) >= br.Size() {
			return b
		}
		n = br.Buffered() + 1
		if n > br.Size() {
			n = br.Size()
		}
	}
}

// firstByte returns the first byte that is not white space, if the read
// buffer holds one, and leaves the input unread.
func firstByte(br *bufio.Reader) (c byte, found bool) {
	peekUntil(br, func(b []byte) bool {
		if i := indexNonSpace(b); i >= 0 {
			c, found = b[i], true
		}
		return found
	})
	return c, found
}

// indexNonSpace returns the index of the first byte of b that is not JSON
// white space, or -1.
func indexNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return i
		}
	}
	return -1
}

// peekLine returns the first line that is not blank, without its line end
// and leading blank lines, unread.
func peekLine(br *bufio.Reader) []byte {
	start := -1
	var line []byte
	peekUntil(br, func(b []byte) bool {
		if start < 0 {
			start = indexNonSpace(b)
			if start < 0 {
				return false
			}
			// Back to the start of that line: leading spaces are content.
			for start > 0 && b[start-1] != '\n' {
				start--
			}
		}
		if i := bytes.IndexByte(b[start:], '\n'); i >= 0 {
			line = b[start : start+i]
			return true
		}
		line = b[start:]
		return false
	})
	return bytes.TrimRight(line, "\r")
}

// detectJSONObjects tells a {"entries": [...]} wrapper and NDJSON from
// JSON objects: the first object's first key, and whether that object is
// complete on its first line.
func detectJSONObjects(br *bufio.Reader) Format {
	var key string
	peekUntil(br, func(b []byte) bool {
		dec := json.NewDecoder(bytes.NewReader(b))
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF)
		}
		t, err := dec.Token()
		if err != nil {
			return !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF)
		}
		key, _ = t.(string)
		return true
	})
	if key == "entries" {
		return FormatJSON
	}
	pairs, err := objectPairs(bytes.TrimSpace(peekLine(br)), nil)
	if err != nil {
		return FormatJSON // not complete on its first line
	}
	for _, p := range pairs {
		if p.key == "entries" && p.val[0] == '[' {
			return FormatJSON // a one-line wrapper
		}
	}
	return FormatNDJSON
}

// detectDelimiter picks the most frequent of , ; and tab in the header
// line; ',' when none occurs or on a tie.
func detectDelimiter(header []byte) rune {
	best, n := ',', bytes.Count(header, []byte{','})
	for _, c := range []byte{';', '\t'} {
		if k := bytes.Count(header, []byte{c}); k > n {
			best, n = rune(c), k
		}
	}
	return best
}

func validDelimiter(r rune) bool {
	return r != 0 && r != '"' && r != '\r' && r != '\n' && r != utf8.RuneError && utf8.ValidRune(r)
}

// detectPreset recognises a tool's export by its header.
func detectPreset(header []byte, comma rune) Format {
	cr := csv.NewReader(bytes.NewReader(header))
	cr.Comma = comma
	cr.LazyQuotes = true
	cr.FieldsPerRecord = -1
	rec, err := cr.Read()
	if err != nil {
		return FormatCSV
	}
	has := make(map[string]bool, len(rec))
	for _, h := range rec {
		has[headerKey(h)] = true
	}
	all := func(names ...string) bool {
		for _, n := range names {
			if !has[n] {
				return false
			}
		}
		return true
	}
	switch {
	case all("user", "email", "start date", "duration"):
		return FormatToggl
	case all("user", "start date") && (has["duration (h)"] || has["duration (decimal)"]):
		return FormatClockify
	case all("date", "hours", "first name", "last name"):
		return FormatHarvest
	}
	return FormatCSV
}

// headerKey is how header names are compared: trimmed, lower case.
func headerKey(h string) string {
	return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\uFEFF")))
}

// inputGuard sits under the read buffer and fails a read once one record
// has consumed more than maxRecordBytes.
type inputGuard struct {
	r io.Reader
	n int64 // bytes read since reset
}

func (g *inputGuard) Read(p []byte) (int, error) {
	if g.n > maxRecordBytes {
		return 0, errRecordTooLarge
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	return n, err
}

// reset starts the count for the next record.
func (g *inputGuard) reset() { g.n = 0 }

// sizeText renders a byte count for messages.
func sizeText(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
