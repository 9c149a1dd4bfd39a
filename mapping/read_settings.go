package mapping

import (
	"fmt"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // time_zone names resolve on images without a zoneinfo database
	"unicode/utf8"
)

// Reader settings come from four places, strongest first: a command's
// flag, an environment variable, the rules file's read: block for the
// format being read (read: {clockify: {...}}), and the rules file's
// general read: block; then the defaults and detection. Every path that
// reads entries (import, the inbox, publish, the NATS consumer and a
// re-driven source) gets its options from EffectiveReadOptions, so that
// one file reads alike everywhere.

// Encoding names the text encoding of an input.
type Encoding string

// The encodings. EncodingAuto reads UTF-8 (with or without a byte order
// mark), and input whose first 64 KiB are not valid UTF-8 as
// Windows-1252, saying so.
const (
	EncodingAuto        Encoding = ""
	EncodingUTF8        Encoding = "utf-8"
	EncodingWindows1252 Encoding = "windows-1252"
	EncodingLatin1      Encoding = "iso-8859-1"
)

// ParseEncoding reads an encoding name: auto, utf-8, windows-1252 or
// iso-8859-1 (also utf8, cp1252, latin1, without case).
func ParseEncoding(s string) (Encoding, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return EncodingAuto, nil
	case "utf-8", "utf8":
		return EncodingUTF8, nil
	case "windows-1252", "cp1252", "win1252":
		return EncodingWindows1252, nil
	case "iso-8859-1", "latin1", "latin-1", "iso8859-1":
		return EncodingLatin1, nil
	}
	return "", fmt.Errorf("%q is not auto, utf-8, windows-1252 or iso-8859-1", s)
}

// ReadSettings are the reader settings as one place states them; an
// empty field (nil DecimalComma) is not set there.
type ReadSettings struct {
	DateFormat   string // YYYY-MM-DD, DD/MM/YYYY, MM/DD/YYYY, …
	DecimalComma *bool  // 7,5 means 7.5
	Delimiter    string // one character, or tab / \t
	Encoding     string // auto, utf-8, windows-1252, iso-8859-1
	TimeZone     string // IANA name: the zone in which a timestamp with an offset falls on its date
}

// readSetting names one setting in every place it can be set.
type readSetting struct{ key, flag, env string }

// The settings, for messages.
var (
	settingDateFormat   = readSetting{"date_format", "--date-format", "PAYSYNC_DATE_FORMAT"}
	settingDecimalComma = readSetting{"decimal_comma", "--decimal-comma", "PAYSYNC_DECIMAL_COMMA"}
	settingDelimiter    = readSetting{"delimiter", "--delimiter", "PAYSYNC_DELIMITER"}
	settingEncoding     = readSetting{"encoding", "--encoding", "PAYSYNC_ENCODING"}
	settingTimeZone     = readSetting{"time_zone", "--time-zone", "PAYSYNC_TIME_ZONE"}
	readSettingKeys     = []readSetting{settingDateFormat, settingDecimalComma, settingDelimiter, settingEncoding, settingTimeZone}
)

// String names the setting where it can be changed.
func (s readSetting) String() string {
	return s.flag + ", " + s.env + " or the rules' read." + s.key
}

// ParseDelimiter reads a delimiter setting: one character, or tab / \t.
func ParseDelimiter(s string) (rune, error) {
	if s == "" {
		return 0, nil
	}
	if s == `\t` || strings.EqualFold(s, "tab") {
		return '\t', nil
	}
	r, n := utf8.DecodeRuneInString(s)
	if n != len(s) || !validDelimiter(r) {
		return 0, fmt.Errorf("%q: want one character that is not a quote or a line break (or tab)", s)
	}
	return r, nil
}

// apply sets what s states on o. An error names the setting in every
// place it can be changed.
func (s ReadSettings) apply(o *ReadOptions) error {
	if s.DateFormat != "" {
		if _, err := parseDateLayout(s.DateFormat); err != nil {
			return fmt.Errorf("%v (set it with %s)", err, settingDateFormat)
		}
		o.DateFormat = s.DateFormat
	}
	if s.DecimalComma != nil {
		o.DecimalComma = *s.DecimalComma
	}
	if s.Delimiter != "" {
		r, err := ParseDelimiter(s.Delimiter)
		if err != nil {
			return fmt.Errorf("delimiter %v (set it with %s)", err, settingDelimiter)
		}
		o.Delimiter = r
	}
	if s.Encoding != "" {
		e, err := ParseEncoding(s.Encoding)
		if err != nil {
			return fmt.Errorf("encoding %v (set it with %s)", err, settingEncoding)
		}
		o.Encoding = e
	}
	if s.TimeZone != "" {
		loc, err := loadZone(s.TimeZone)
		if err != nil {
			return fmt.Errorf("time zone %v (set it with %s)", err, settingTimeZone)
		}
		o.TimeZone = loc
	}
	return nil
}

// loadZone reads an IANA time zone name (or UTC, Local).
func loadZone(name string) (*time.Location, error) {
	loc, err := time.LoadLocation(strings.TrimSpace(name))
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone name such as Europe/Copenhagen or UTC", name)
	}
	return loc, nil
}

// ReadBlock is the rules file's read: block: settings for every input,
// and per format (read: {toggl: {...}}).
type ReadBlock struct {
	General ReadSettings
	Formats map[Format]ReadSettings
}

// EffectiveReadOptions are the reader options for format (FormatAuto:
// detected per input) from the settings of flags and environment
// (override, the flag already laid over the variable) and the rules
// file's read: block (rules may be nil). Precedence, per setting: override,
// then the block for the format read, then the general block, then the
// defaults (YYYY-MM-DD, decimal point, delimiter and encoding detected,
// UTC). The per-format blocks are resolved here into ByFormat, and
// applied by NewReader once it knows the format.
func EffectiveReadOptions(format Format, override ReadSettings, rules *Rules) (ReadOptions, error) {
	f, err := checkFormat(format)
	if err != nil {
		return ReadOptions{}, err
	}
	var block ReadBlock
	if rules != nil {
		block = rules.Read
	}
	o := ReadOptions{Format: f}
	if err := block.General.apply(&o); err != nil {
		return ReadOptions{}, fmt.Errorf("%s: read: %w", rulesName(rules), err)
	}
	base := o
	if err := override.apply(&o); err != nil {
		return ReadOptions{}, err
	}
	formats := make([]Format, 0, len(block.Formats))
	for k := range block.Formats {
		formats = append(formats, k)
	}
	sort.Slice(formats, func(i, j int) bool { return formats[i] < formats[j] })
	for _, k := range formats {
		fo := base
		if err := block.Formats[k].apply(&fo); err != nil {
			return ReadOptions{}, fmt.Errorf("%s: read.%s: %w", rulesName(rules), k, err)
		}
		if err := override.apply(&fo); err != nil {
			return ReadOptions{}, err
		}
		fo.Format = k
		if o.ByFormat == nil {
			o.ByFormat = make(map[Format]ReadOptions, len(formats))
		}
		o.ByFormat[k] = fo
	}
	return o, nil
}

func rulesName(r *Rules) string {
	if r == nil || r.Source == "" {
		return "rules"
	}
	return r.Source
}

// ForFormat returns the options for reading format: those of its block
// in the rules file's read: block when it has one.
func (o ReadOptions) ForFormat(f Format) ReadOptions {
	if fo, ok := o.ByFormat[f]; ok {
		fo.Columns = o.Columns
		return fo
	}
	o.Format, o.ByFormat = f, nil
	return o
}

// zone is the time zone of timestamps (UTC unless set).
func (o ReadOptions) zone() *time.Location {
	if o.TimeZone == nil {
		return time.UTC
	}
	return o.TimeZone
}
