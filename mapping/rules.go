package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
	"go.yaml.in/yaml/v3"
)

// Rules is an operator's mapping: how entries become pay parts.
type Rules struct {
	Source    string // the rules file, for messages
	Company   string // default company ("" = the caller's default)
	Aggregate bool   // sum entries per company × employee × code × rate × period
	// Period is the pay period a pay part sums entries of (month, the
	// default, or week): a pay part never spans two, so that each period's
	// totals are its own.
	Period    paysync.PeriodKind
	Rounding  paysync.Rounding // how hours and products are rounded
	Places    int32            // to how many decimals (default 2: hundredths)
	Employees EmployeeRules
	Skip      SkipRules
	Rules     []Rule
	// Read are the reader settings of the read: block, in general and per
	// format; EffectiveReadOptions lays flags and variables over them.
	Read ReadBlock
}

// EmployeeRules resolve an entry's person to a payroll employee id.
type EmployeeRules struct {
	ByNumber   map[string]string // employee number → payroll id
	ByEmail    map[string]string // e-mail (lower case) → payroll id
	ByName     map[string]string // name (folded) → payroll id
	MatchNames bool              // finally, exact name match against the company's employees
	Ignore     map[string]bool   // folded e-mails, names, numbers or ids of people never paid through paysync
}

// SkipRules drop entries that must not be paid.
type SkipRules struct {
	Unapproved bool // entries with approved: false
	ZeroHours  bool // entries with zero hours and no units or amount
}

// Rule maps matching entries to a pay code.
type Rule struct {
	Name     string
	Line     int // in the rules file
	Default  bool
	Continue bool // after this rule, keep matching: one entry, several pay parts (e.g. hours and a supplement)
	Match    Match
	Code     string
	Units    *Source
	Rate     *Source
	Amount   *Source
}

// Match selects entries; every given condition must hold. Lists match any
// of their values, case-insensitively.
type Match struct {
	Type     []string
	Project  []string
	Tags     []string // any of these tags
	Billable *bool
	Approved *bool
}

// SourceKind says where a value comes from.
type SourceKind int

// The value sources of a rule.
const (
	FromHours   SourceKind = iota + 1 // the entry's hours
	FromConst                         // a constant
	FromField                         // an entry field: units, rate, amount or any extra column
	FromProduct                       // the product of two operands, computed on the final pay part
	FromUnits                         // (product operand) the pay part's units
	FromRate                          // (product operand) the pay part's rate
)

// Source is where a rule takes units, rate or amount from.
type Source struct {
	Kind     SourceKind
	Const    decimal.Decimal
	Field    string
	Operands [2]*Source
	Line     int
}

func (s *Source) String() string {
	switch s.Kind {
	case FromHours:
		return "hours"
	case FromConst:
		return s.Const.String()
	case FromField:
		return "field " + s.Field
	case FromProduct:
		return s.Operands[0].String() + " × " + s.Operands[1].String()
	case FromUnits:
		return "units"
	case FromRate:
		return "rate"
	}
	return "?"
}

// DefaultRules is the behaviour without a rules file: entries must carry
// employee_id and code; they are aggregated, hours rounded half-up to
// hundredths, unapproved and zero-hour entries skipped.
func DefaultRules() *Rules {
	return &Rules{
		Aggregate: true,
		Period:    paysync.PeriodMonth,
		Rounding:  paysync.HalfUp,
		Places:    2,
		Employees: EmployeeRules{ByNumber: map[string]string{}, ByEmail: map[string]string{}, ByName: map[string]string{}, Ignore: map[string]bool{}},
		Skip:      SkipRules{Unapproved: true, ZeroHours: true},
	}
}

// fold normalises names and e-mails for comparison.
func fold(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// ---- loading ----

type rulesFile struct {
	Version   int    `yaml:"version"`
	Company   string `yaml:"company"`
	Aggregate *bool  `yaml:"aggregate"`
	Period    string `yaml:"period"`
	Rounding  *struct {
		Mode   string `yaml:"mode"`
		Places *int32 `yaml:"places"`
	} `yaml:"rounding"`
	Employees *struct {
		MatchNames bool              `yaml:"match_names"`
		ByNumber   map[string]string `yaml:"by_number"`
		ByEmail    map[string]string `yaml:"by_email"`
		ByName     map[string]string `yaml:"by_name"`
		Ignore     []string          `yaml:"ignore"`
	} `yaml:"employees"`
	Skip *struct {
		Unapproved *bool `yaml:"unapproved"`
		ZeroHours  *bool `yaml:"zero_hours"`
	} `yaml:"skip"`
	Rules []ruleYAML  `yaml:"rules"`
	Read  *sourceYAML `yaml:"read"` // interpreted by readBlock, for its lines
}

type ruleYAML struct {
	Name     string      `yaml:"name"`
	Default  bool        `yaml:"default"`
	Continue bool        `yaml:"continue"`
	Match    *matchYAML  `yaml:"match"`
	Code     string      `yaml:"code"`
	Units    *sourceYAML `yaml:"units"`
	Rate     *sourceYAML `yaml:"rate"`
	Amount   *sourceYAML `yaml:"amount"`
}

type matchYAML struct {
	Type     stringList `yaml:"type"`
	Project  stringList `yaml:"project"`
	Tags     stringList `yaml:"tags"`
	Billable *bool      `yaml:"billable"`
	Approved *bool      `yaml:"approved"`
}

// stringList accepts one string or a list of strings.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = stringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(stringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a string", c.Line)}}
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a string or a list of strings", n.Line)}}
}

// sourceYAML keeps the node; it is interpreted after decoding so that its
// errors carry lines and say what is allowed.
type sourceYAML struct{ node *yaml.Node }

func (s *sourceYAML) UnmarshalYAML(n *yaml.Node) error { s.node = n; return nil }

// LoadRules reads a rules file. Every problem is reported with its line;
// unknown keys and wrong types are errors.
func LoadRules(source string, r io.Reader) (*Rules, error) {
	data, err := io.ReadAll(io.LimitReader(r, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read rules %s: %w", source, err)
	}
	var f rulesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlProblems(source, err)
	}
	var ruleLines []int
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil {
		ruleLines = sequenceLines(&root, "rules")
	}
	var probs []error
	add := func(line int, field, msg, hint string) {
		probs = append(probs, &Problem{Source: source, Line: line, Field: field, Msg: msg, Hint: hint})
	}
	if f.Version != 0 && f.Version != 1 {
		add(0, "version", fmt.Sprintf("version %d is not supported", f.Version), "this paysync reads version 1")
	}
	rs := DefaultRules()
	rs.Source = source
	rs.Company = strings.TrimSpace(f.Company)
	if f.Aggregate != nil {
		rs.Aggregate = *f.Aggregate
	}
	if f.Period != "" {
		k, err := paysync.ParsePeriodKind(f.Period)
		if err != nil {
			add(0, "period", err.Error(), "use month or week")
		}
		rs.Period = k
	}
	if f.Rounding != nil {
		m, err := paysync.ParseRounding(f.Rounding.Mode)
		if err != nil {
			add(0, "rounding.mode", err.Error(), "use half_up, half_even, down or up")
		}
		rs.Rounding = m
		if f.Rounding.Places != nil {
			if *f.Rounding.Places < 0 || *f.Rounding.Places > 6 {
				add(0, "rounding.places", fmt.Sprintf("%d is outside 0..6", *f.Rounding.Places), "payroll takes hundredths: 2")
			}
			rs.Places = *f.Rounding.Places
		}
	}
	if e := f.Employees; e != nil {
		rs.Employees.MatchNames = e.MatchNames
		for k, v := range e.ByNumber {
			rs.Employees.ByNumber[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		for k, v := range e.ByEmail {
			rs.Employees.ByEmail[fold(k)] = strings.TrimSpace(v)
		}
		for k, v := range e.ByName {
			rs.Employees.ByName[fold(k)] = strings.TrimSpace(v)
		}
		for _, k := range e.Ignore {
			rs.Employees.Ignore[fold(k)] = true
		}
	}
	if s := f.Skip; s != nil {
		if s.Unapproved != nil {
			rs.Skip.Unapproved = *s.Unapproved
		}
		if s.ZeroHours != nil {
			rs.Skip.ZeroHours = *s.ZeroHours
		}
	}
	if f.Read != nil {
		rs.Read = readBlock(f.Read.node, add)
	}
	defaults := 0
	for i, ry := range f.Rules {
		line := 0
		if i < len(ruleLines) {
			line = ruleLines[i]
		}
		field := fmt.Sprintf("rules[%d]", i)
		name := ry.Name
		if name == "" {
			name = fmt.Sprintf("rule %d", i+1)
		}
		r := Rule{Name: name, Line: line, Default: ry.Default, Continue: ry.Continue, Code: strings.TrimSpace(ry.Code)}
		if r.Code == "" {
			add(line, field+".code", fmt.Sprintf("rule %q has no code", name), "give the pay code this rule maps to (paysync meta lists them)")
		}
		if ry.Default {
			defaults++
			if ry.Match != nil {
				add(line, field+".match", fmt.Sprintf("default rule %q has a match", name), "a default rule catches every unmatched entry: drop match, or default")
			}
		} else if ry.Match == nil {
			add(line, field+".match", fmt.Sprintf("rule %q has no match", name), "add match: (type, project, tags, billable, approved), or default: true")
		}
		if m := ry.Match; m != nil {
			r.Match = Match{Type: m.Type, Project: m.Project, Tags: m.Tags, Billable: m.Billable, Approved: m.Approved}
		}
		for _, fs := range []struct {
			key string
			src *sourceYAML
			dst **Source
		}{{"units", ry.Units, &r.Units}, {"rate", ry.Rate, &r.Rate}, {"amount", ry.Amount, &r.Amount}} {
			if fs.src == nil {
				continue
			}
			s, err := parseSource(fs.src.node, false)
			if err != nil {
				add(fs.src.node.Line, field+"."+fs.key, err.Error(), sourceHint)
				continue
			}
			*fs.dst = s
		}
		if r.Units == nil && r.Rate == nil && r.Amount == nil {
			add(line, field, fmt.Sprintf("rule %q gives no units, rate or amount", name), "add e.g. units: hours")
		}
		for _, s := range []*Source{r.Units, r.Rate} {
			if s != nil && s.Kind == FromProduct && (usesOperand(s, FromUnits) || usesOperand(s, FromRate)) {
				add(s.Line, field, "units and rate cannot be products of units or rate", "only amount may be e.g. product: [units, rate]")
			}
		}
		rs.Rules = append(rs.Rules, r)
	}
	if defaults > 1 {
		add(0, "rules", fmt.Sprintf("%d default rules", defaults), "keep one default rule")
	}
	if len(probs) > 0 {
		return nil, errors.Join(probs...)
	}
	return rs, nil
}

// readBlock reads the read: block: settings (date_format,
// decimal_comma, delimiter, encoding, time_zone) for every input, and
// blocks of them per format (toggl: {...}). Each bad value is a problem
// with its line.
func readBlock(n *yaml.Node, add func(line int, field, msg, hint string)) ReadBlock {
	var b ReadBlock
	if n.Kind != yaml.MappingNode {
		add(n.Line, "read", "read: wants a mapping of reader settings", readHint)
		return b
	}
	b.General = readSettingsOf(n, "read", add, true, &b)
	return b
}

const readHint = "read: takes date_format, decimal_comma, delimiter, encoding and time_zone, and blocks of them per format (json, ndjson, csv, toggl, clockify, harvest)"

// readSettingsOf reads one block of settings; at the top (general) it
// also takes the per-format blocks into b.
func readSettingsOf(n *yaml.Node, field string, add func(line int, field, msg, hint string), top bool, b *ReadBlock) ReadSettings {
	var s ReadSettings
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := field + "." + k.Value
		if f, err := checkFormat(Format(k.Value)); err == nil && f != FormatAuto {
			if !top {
				add(k.Line, key, "format blocks do not nest", readHint)
				continue
			}
			if v.Kind != yaml.MappingNode {
				add(v.Line, key, fmt.Sprintf("read.%s wants a mapping of reader settings", f), readHint)
				continue
			}
			if b.Formats == nil {
				b.Formats = make(map[Format]ReadSettings)
			}
			b.Formats[f] = readSettingsOf(v, key, add, false, nil)
			continue
		}
		if v.Kind != yaml.ScalarNode {
			add(v.Line, key, "want a single value", readHint)
			continue
		}
		val := strings.TrimSpace(v.Value)
		var one ReadSettings
		switch k.Value {
		case settingDateFormat.key:
			one.DateFormat = val
		case settingDecimalComma.key:
			var on bool
			if err := v.Decode(&on); err != nil {
				add(v.Line, key, fmt.Sprintf("%q is not true or false", v.Value), "decimal_comma: true reads 7,5 as 7.5")
				continue
			}
			one.DecimalComma = &on
		case settingDelimiter.key:
			one.Delimiter = v.Value // a space or tab is a delimiter too
		case settingEncoding.key:
			one.Encoding = val
		case settingTimeZone.key:
			one.TimeZone = val
		default:
			add(k.Line, key, fmt.Sprintf("unknown key %q", k.Value), readHint)
			continue
		}
		if err := one.apply(&ReadOptions{}); err != nil {
			add(v.Line, key, err.Error(), "")
			continue
		}
		switch {
		case one.DateFormat != "":
			s.DateFormat = one.DateFormat
		case one.DecimalComma != nil:
			s.DecimalComma = one.DecimalComma
		case one.Delimiter != "":
			s.Delimiter = one.Delimiter
		case one.Encoding != "":
			s.Encoding = one.Encoding
		case one.TimeZone != "":
			s.TimeZone = one.TimeZone
		}
	}
	return s
}

const sourceHint = `use hours, a number, {field: NAME}, or {product: [A, B]} with A, B among hours, units, rate or a number`

func usesOperand(s *Source, k SourceKind) bool {
	return s.Kind == FromProduct && (s.Operands[0].Kind == k || s.Operands[1].Kind == k)
}

var decimalRe = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// parseSource reads hours | NUMBER | {const: N} | {field: NAME} |
// {product: [A, B]}; inProduct allows the operands units and rate.
func parseSource(n *yaml.Node, inProduct bool) (*Source, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		v := strings.TrimSpace(n.Value)
		switch {
		case v == "hours":
			return &Source{Kind: FromHours, Line: n.Line}, nil
		case inProduct && v == "units":
			return &Source{Kind: FromUnits, Line: n.Line}, nil
		case inProduct && v == "rate":
			return &Source{Kind: FromRate, Line: n.Line}, nil
		case decimalRe.MatchString(v):
			return &Source{Kind: FromConst, Const: decimal.RequireFromString(v), Line: n.Line}, nil
		case v == "units" || v == "rate" || v == "amount":
			return nil, fmt.Errorf("%q alone is ambiguous: write {field: %s} for the entry's own %s", v, v, v)
		}
		return nil, fmt.Errorf("%q is not a value source", v)
	case yaml.MappingNode:
		if len(n.Content) != 2 {
			return nil, errors.New("a value source has exactly one key: const, field or product")
		}
		k, v := n.Content[0].Value, n.Content[1]
		switch k {
		case "const":
			if v.Kind != yaml.ScalarNode || !decimalRe.MatchString(strings.TrimSpace(v.Value)) {
				return nil, fmt.Errorf("const %q is not a decimal number", v.Value)
			}
			return &Source{Kind: FromConst, Const: decimal.RequireFromString(strings.TrimSpace(v.Value)), Line: n.Line}, nil
		case "field":
			if v.Kind != yaml.ScalarNode || strings.TrimSpace(v.Value) == "" {
				return nil, errors.New("field needs an entry field name")
			}
			return &Source{Kind: FromField, Field: strings.TrimSpace(v.Value), Line: n.Line}, nil
		case "product":
			if inProduct {
				return nil, errors.New("products do not nest")
			}
			if v.Kind != yaml.SequenceNode || len(v.Content) != 2 {
				return nil, errors.New("product takes a list of two operands")
			}
			s := &Source{Kind: FromProduct, Line: n.Line}
			for i, c := range v.Content {
				op, err := parseSource(c, true)
				if err != nil {
					return nil, fmt.Errorf("product operand %d: %w", i+1, err)
				}
				if op.Kind == FromField {
					return nil, errors.New("product operands are hours, units, rate or numbers (products are computed on the final, aggregated pay part)")
				}
				s.Operands[i] = op
			}
			return s, nil
		}
		return nil, fmt.Errorf("unknown value source key %q", k)
	}
	return nil, errors.New("not a value source")
}

// sequenceLines returns the line of each item of the top-level sequence key.
func sequenceLines(root *yaml.Node, key string) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.SequenceNode {
			var out []int
			for _, c := range m.Content[i+1].Content {
				out = append(out, c.Line)
			}
			return out
		}
	}
	return nil
}

var yamlLineRe = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlProblems turns YAML errors into Problems with lines.
func yamlProblems(source string, err error) error {
	var lines []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		lines = te.Errors
	} else {
		lines = []string{err.Error()}
	}
	var probs []error
	for _, l := range lines {
		p := &Problem{Source: source, Msg: strings.TrimPrefix(l, "yaml: "), Hint: "see deploy/examples/rules.yaml for the format"}
		if m := yamlLineRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Msg = m[2]
		}
		if strings.Contains(p.Msg, "not found in type") {
			key := strings.TrimPrefix(strings.SplitN(p.Msg, " not found", 2)[0], "field ")
			p.Field = key
			p.Msg = fmt.Sprintf("unknown key %q", key)
			p.Hint = "check the spelling; see deploy/examples/rules.yaml for the keys"
		}
		probs = append(probs, p)
	}
	return errors.Join(probs...)
}
