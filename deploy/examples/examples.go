// Package examples bundles the sample rules file and exports (matching the
// sandbox's fixture people) so that `paysync demo` runs from any directory.
package examples

import "embed"

// Files holds rules.yaml, toggl.csv, clockify.csv, harvest.csv and
// entries.ndjson.
//
//go:embed rules.yaml toggl.csv clockify.csv harvest.csv entries.ndjson
var Files embed.FS
