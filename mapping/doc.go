// Package mapping turns what time-tracking systems produce into pay parts
// the payroll API will accept, or into precise problems.
//
// The stages, each streaming one entry at a time:
//
//   - Readers (NewReader) parse canonical JSON/NDJSON entries, generic CSV
//     with a column map, and the Toggl Track, Clockify and Harvest detailed
//     CSV exports, detecting the format from the first bytes. Every bad
//     record is a *Problem naming the source, line (or record), entry id and
//     field; reading goes on.
//   - Rules (LoadRules) are the operator's YAML mapping: default company,
//     employee resolution tables, an ignore list, skip rules, and rules
//     matched in order on type/project/tags/billable/approved that give a pay
//     code and where units, rate and amount come from. Entries that carry
//     employee_id and code need no rules.
//   - The Mapper resolves the company and employee and checks each entry's
//     pay part against pay_parts_meta (unknown code, mandatory missing,
//     forbidden present), the company's employees, and the wire's precision.
//     Meta and employees are fetched once per run (Cache).
//   - The Planner aggregates per company × employee × code × rate within one
//     import (configurable) and keeps the entries behind every pay part.
//
// Numbers are exact decimals throughout. Hours are kept in seconds until a
// pay part is made, so 3 × 20 minutes is exactly one hour; then they are
// rounded once under the rules' explicit rounding (default half-up to
// hundredths). A product (amount = units × rate) is computed on the final,
// aggregated, rounded units and rounded the same way.
package mapping
