package sandbox

import "strings"

// canonicalOps names the camelCase dialect's root fields by their
// snake_case names, so that faults and counters use one name for each
// operation whatever the dialect.
var canonicalOps = map[string]string{
	"companiesExt":   "companies",
	"payPartsMeta":   "pay_parts_meta",
	"currentCompany": "current_company",
	"createPayParts": "create_pay_parts",
	"deletePayParts": "delete_pay_parts",
}

// canonicalOp is op's snake_case name.
func canonicalOp(op string) string {
	if c, ok := canonicalOps[op]; ok {
		return c
	}
	return op
}

// rootField returns the name of the first field the operation selects:
// the operation named operationName, or else the document's first one.
// Aliases ("a: create_pay_parts") and inline fragments or fragment spreads
// at the root are seen through. It returns "" for a document it cannot
// read; graph-gophers then rejects the document anyway.
//
// This is a small scan, not a parser: faults must be matched before
// graph-gophers runs, and graph-gophers keeps its parser internal.
func rootField(doc, operationName string) string {
	t := gqlTokens(doc)
	at := func(i int) string {
		if i < 0 || i >= len(t) {
			return ""
		}
		return t[i]
	}
	first, named := -1, -1
	frags := map[string]int{} // fragment name -> index of its "{"
	for i := 0; i < len(t); {
		switch t[i] {
		case "{": // query shorthand
			if first < 0 {
				first = i
			}
			i = skipBlock(t, i, "{", "}")
		case "query", "mutation", "subscription":
			i++
			name := ""
			if isGQLName(at(i)) {
				name = t[i]
				i++
			}
			if at(i) == "(" {
				i = skipBlock(t, i, "(", ")")
			}
			i = skipDirectives(t, i)
			if at(i) != "{" {
				return ""
			}
			if first < 0 {
				first = i
			}
			if operationName != "" && name == operationName && named < 0 {
				named = i
			}
			i = skipBlock(t, i, "{", "}")
		case "fragment": // fragment Name on Type @dirs { ... }
			name := at(i + 1)
			i = skipDirectives(t, i+4)
			if at(i) != "{" {
				return ""
			}
			frags[name] = i
			i = skipBlock(t, i, "{", "}")
		default:
			return ""
		}
	}
	start := first
	if operationName != "" {
		start = named
	}
	if start < 0 {
		return ""
	}
	return firstField(t, start, frags, 0)
}

// firstField returns the first field of the selection set at t[i] == "{".
func firstField(t []string, i int, frags map[string]int, depth int) string {
	at := func(i int) string {
		if i < 0 || i >= len(t) {
			return ""
		}
		return t[i]
	}
	if depth > 8 || at(i) != "{" {
		return ""
	}
	i++
	switch tok := at(i); {
	case tok == "...":
		i++
		if at(i) == "on" {
			i += 2
		}
		if at(i) == "@" {
			i = skipDirectives(t, i)
		}
		if at(i) == "{" {
			return firstField(t, i, frags, depth+1)
		}
		if k, ok := frags[at(i)]; ok {
			return firstField(t, k, frags, depth+1)
		}
		return ""
	case isGQLName(tok):
		if at(i+1) == ":" && isGQLName(at(i+2)) {
			return t[i+2]
		}
		return tok
	}
	return ""
}

// skipBlock returns the index after the bracket that closes t[i].
func skipBlock(t []string, i int, open, close string) int {
	depth := 0
	for ; i < len(t); i++ {
		switch t[i] {
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(t)
}

// skipDirectives returns the index after any "@name(args)" at t[i].
func skipDirectives(t []string, i int) int {
	for i < len(t) && t[i] == "@" {
		i += 2
		if i < len(t) && t[i] == "(" {
			i = skipBlock(t, i, "(", ")")
		}
	}
	return i
}

func isGQLName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// gqlTokens splits a GraphQL document into names and punctuators. Strings
// become `""` and numbers "0": the scan never needs their values.
func gqlTokens(s string) []string {
	s = strings.TrimPrefix(s, "\uFEFF")
	var t []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
		case strings.HasPrefix(s[i:], `"""`):
			i += 3
			for i < len(s) && !strings.HasPrefix(s[i:], `"""`) {
				if strings.HasPrefix(s[i:], `\"""`) {
					i += 4
					continue
				}
				i++
			}
			i += 3
			t = append(t, `""`)
		case c == '"':
			for i++; i < len(s) && s[i] != '"' && s[i] != '\n'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i++
			t = append(t, `""`)
		case strings.HasPrefix(s[i:], "..."):
			i += 3
			t = append(t, "...")
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			t = append(t, s[i:j])
			i = j
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && (s[j] == '.' || s[j] == '+' || s[j] == '-' || s[j] >= '0' && s[j] <= '9' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				j++
			}
			t = append(t, "0")
			i = j
		default:
			t = append(t, s[i:i+1])
			i++
		}
	}
	return t
}
