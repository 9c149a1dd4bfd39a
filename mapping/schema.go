package mapping

import _ "embed"

// EntrySchema is the JSON Schema (draft 2020-12) of one timesheet entry
// as the JSON and NDJSON readers accept it: required id and date, an
// employee reference, hours or units/rate/amount (type and code are
// optional: the rules map what has neither by project, tags or a default) (a
// tombstone, "deleted": true, needs only its id), numbers
// as JSON numbers or decimal strings, and further properties only as
// scalars (they land in Entry.Fields). Publish it to whoever produces
// entries; the reader tests check that the schema and the reader agree.
//
//go:embed schema/entry.schema.json
var EntrySchema []byte
