package mapping

import (
	"fmt"
	"strings"
	"time"
)

// isoDate is the canonical date layout, and the default one.
const isoDate = "YYYY-MM-DD"

// dateLayout is a parsed date format such as "DD/MM/YYYY": tokens YYYY,
// MM, DD (fixed width), M and D (one or two digits), and separators.
// An MM or DD between separators also takes one digit (2016-01-1 under
// YYYY-MM-DD): exports write them so, and the separators leave no doubt;
// without separators (YYYYMMDD) the width is what tells the parts apart.
// Dates are parsed by hand: this is on the hot path of every CSV row.
type dateLayout struct {
	text  string
	parts []datePart
	iso   bool // exactly YYYY-MM-DD: canonical input is returned as is
}

type datePart struct {
	kind  byte // 'Y' year (4 digits), 'M'/'D' (2 digits), 'm'/'d' (1–2 digits), 0 literal
	lit   byte
	loose bool // an 'M'/'D' between separators: one digit will do
}

// parseDateLayout reads a date format. Tokens are case-insensitive.
func parseDateLayout(s string) (dateLayout, error) {
	if strings.TrimSpace(s) == "" {
		s = isoDate
	}
	l := dateLayout{text: s}
	var seen [3]int
	for i := 0; i < len(s); {
		c := s[i] | 0x20 // lower case for letters
		n := 1
		for i+n < len(s) && s[i+n]|0x20 == c && isLetter(s[i+n]) {
			n++
		}
		switch {
		case c == 'y' && isLetter(s[i]) && n == 4:
			l.parts = append(l.parts, datePart{kind: 'Y'})
			seen[0]++
		case c == 'm' && isLetter(s[i]) && n <= 2:
			l.parts = append(l.parts, datePart{kind: "mM"[n-1]})
			seen[1]++
		case c == 'd' && isLetter(s[i]) && n <= 2:
			l.parts = append(l.parts, datePart{kind: "dD"[n-1]})
			seen[2]++
		case isLetter(s[i]) || s[i] >= 0x80 || (s[i] >= '0' && s[i] <= '9'):
			return dateLayout{}, fmt.Errorf("date format %q: %q is not a token: use YYYY, MM, DD, M, D and separators", s, s[i:i+n])
		default:
			l.parts = append(l.parts, datePart{lit: s[i]})
			n = 1
		}
		i += n
	}
	if seen != [3]int{1, 1, 1} {
		return dateLayout{}, fmt.Errorf("date format %q: want one year (YYYY), one month (MM or M) and one day (DD or D)", s)
	}
	for i := range l.parts {
		p := &l.parts[i]
		p.loose = (p.kind == 'M' || p.kind == 'D') &&
			(i == 0 || l.parts[i-1].kind == 0) && (i == len(l.parts)-1 || l.parts[i+1].kind == 0)
	}
	l.iso = strings.EqualFold(s, isoDate)
	return l, nil
}

// strictLayout is a valid layout that takes MM and DD at their full
// width only.
func strictLayout(s string) dateLayout {
	l, err := parseDateLayout(s)
	if err != nil {
		panic(err)
	}
	for i := range l.parts {
		l.parts[i].loose = false
	}
	return l
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// parse reads s under the layout and returns it as YYYY-MM-DD, or false
// when s does not follow the layout or is not a real date.
func (l *dateLayout) parse(s string) (string, bool) {
	var y, m, d int
	i := 0
	for _, p := range l.parts {
		if p.kind == 0 {
			if i >= len(s) || s[i] != p.lit {
				return "", false
			}
			i++
			continue
		}
		min, max := 2, 2
		switch {
		case p.kind == 'Y':
			min, max = 4, 4
		case p.kind == 'm' || p.kind == 'd' || p.loose:
			min = 1
		}
		v, n := 0, 0
		for n < max && i < len(s) && s[i] >= '0' && s[i] <= '9' {
			v = v*10 + int(s[i]-'0')
			i++
			n++
		}
		if n < min {
			return "", false
		}
		switch p.kind {
		case 'Y':
			y = v
		case 'M', 'm':
			m = v
		default:
			d = v
		}
	}
	if i != len(s) || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return "", false
	}
	if l.iso && len(s) == len(isoDate) {
		return s, true
	}
	return formatDate(y, m, d), true
}

// formatDate renders YYYY-MM-DD.
func formatDate(y, m, d int) string {
	b := [10]byte{
		byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + m/10), byte('0' + m%10), '-',
		byte('0' + d/10), byte('0' + d%10),
	}
	return string(b[:])
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// dateParser tries layouts in order; the first is the configured one and
// names the format in hints.
type dateParser struct {
	layouts []dateLayout
}

// newDateParser returns a parser for the configured format plus
// fallbacks. ISO dates are accepted too whenever that is unambiguous
// (the configured format does not begin with the year).
func newDateParser(configured string, fallbacks ...string) (dateParser, error) {
	first, err := parseDateLayout(configured)
	if err != nil {
		return dateParser{}, err
	}
	p := dateParser{layouts: []dateLayout{first}}
	if first.parts[0].kind != 'Y' {
		fallbacks = append(fallbacks, isoDate)
	}
	for _, f := range fallbacks {
		l, err := parseDateLayout(f)
		if err != nil {
			return dateParser{}, err
		}
		if !strings.EqualFold(l.text, first.text) {
			p.layouts = append(p.layouts, l)
		}
	}
	return p, nil
}

func (p *dateParser) parse(s string) (string, bool) {
	for i := range p.layouts {
		if d, ok := p.layouts[i].parse(s); ok {
			return d, true
		}
	}
	return "", false
}

// format names the accepted formats for hints.
func (p *dateParser) format() string {
	names := make([]string, len(p.layouts))
	for i, l := range p.layouts {
		names[i] = l.text
	}
	return strings.Join(names, " or ")
}

// zonedDate returns the date, YYYY-MM-DD, of an RFC 3339 timestamp with
// its UTC offset (2026-11-02T23:30:00Z) in zone: the export's time zone
// (--time-zone, PAYSYNC_TIME_ZONE or the rules' read.time_zone; UTC by
// default) decides on which day, and so in which pay period, the entry
// falls. A time without an offset is no timestamp here.
func zonedDate(s string, zone *time.Location) (string, bool) {
	if len(s) < len("2006-01-02T15:04Z") || (s[10] != 'T' && s[10] != 't') {
		return "", false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", false
	}
	if zone == nil {
		zone = time.UTC
	}
	return t.In(zone).Format(time.DateOnly), true
}
