package mapping

import (
	"time"

	"github.com/paysync/paysync"
)

// Reader streams entries from one source.
//
// Next returns the next entry (the zero Entry with any error). An error of
// type *Problem concerns one record only: the caller records it and calls
// Next again. io.EOF ends the stream. Any other error is fatal for the
// source.
type Reader interface {
	Next() (paysync.Entry, error)
}

// Format names an input format.
type Format string

// The formats. FormatAuto detects the format from the first bytes.
const (
	FormatAuto     Format = ""
	FormatJSON     Format = "json"     // one entry, {"entries": [...]}, or an array
	FormatNDJSON   Format = "ndjson"   // one entry per line
	FormatCSV      Format = "csv"      // header + rows, configurable column map
	FormatToggl    Format = "toggl"    // Toggl Track detailed report CSV
	FormatClockify Format = "clockify" // Clockify detailed report CSV
	FormatHarvest  Format = "harvest"  // Harvest detailed time report CSV
)

// Formats lists the formats a user can name.
var Formats = []Format{FormatJSON, FormatNDJSON, FormatCSV, FormatToggl, FormatClockify, FormatHarvest}

// ReadOptions configure the readers.
type ReadOptions struct {
	Format Format // FormatAuto: detect

	// CSV settings (generic CSV; the presets use them where they apply).
	Delimiter    rune              // ',' when zero
	DecimalComma bool              // "7,5" means 7.5
	DateFormat   string            // e.g. "YYYY-MM-DD" (default), "DD/MM/YYYY", "MM/DD/YYYY", "DD.MM.YYYY"
	Columns      map[string]string // entry field → CSV header, for generic CSV (default: the field names)

	// Encoding of the text (EncodingAuto: UTF-8, with or without a byte
	// order mark, else Windows-1252, said in the reader's Notes).
	Encoding Encoding
	// TimeZone decides the date of a timestamp with an offset (a JSON
	// "start", a CSV date cell such as 2026-11-02T23:30:00Z): nil is UTC.
	TimeZone *time.Location

	// ByFormat holds the options for a format whose own block the rules
	// file's read: block has; NewReader applies them once it knows the
	// format (EffectiveReadOptions fills it).
	ByFormat map[Format]ReadOptions
}

// Noter is implemented by a reader that has something to say about how it
// read its input, such as an encoding it detected: a line for the
// import or inbox report.
type Noter interface {
	Notes() []string
}
