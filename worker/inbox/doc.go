// Package inbox is paysync's cron-polled file source: on a schedule it takes
// the timesheet exports dropped into a folder, imports each through a
// [Sink] (the daemon's is worker.InboxSink; the inbox imports nothing of
// worker or payroll), and moves it to processed/ or failed/ with a
// human-readable report beside it.
//
// # Dropping files
//
// Write a file under a temporary name and rename it when it is complete:
//
//	cp export.csv /srv/inbox/hours.csv.part && mv /srv/inbox/hours.csv.part /srv/inbox/hours.csv
//
// A rename within one file system is atomic, so the inbox sees either no
// file or the whole file. Names that are hidden (".x") or end in .part, .tmp,
// .partial, .crdownload or ~ are never taken, nor are files that match none
// of the patterns (default *.csv, *.json, *.ndjson, *.txt; matched without
// regard to case), directories (processed/ and failed/ among them) and
// anything that is not a regular file.
//
// For writers that cannot rename, the inbox also waits for a file to settle:
// a file is taken only when its size and modification time are the same as
// at the previous look. A file seen for the first time is "waiting" and is
// taken at the next poll if it has not changed. [Config.SettleLook] makes a
// single poll look twice, that far apart (paysync run --once). Settling is a
// heuristic (a writer may pause longer than one poll interval); the rename is
// the guarantee.
//
// A file whose last byte is not a line break waits longer: a writer that
// flushes fixed-size buffers stops in the middle of a line, and a cut line
// can read as a valid row ("e5,…,6" of "e5,…,6.25"), so that the cut entry
// would be paid, and the whole line, read again later, would conflict with
// it. Such a file is taken only once it has been unchanged for
// [Config.SettleIncomplete] (default 30 s) and over one more look than a
// complete file. A file that really ends without a line break (a JSON
// document often does) is imported all the same, later. Its FileResult says
// why it waits (OutcomeWaiting with Error set); the debug log says so once.
// With SettleLook, the poll itself waits for such a file (at most
// SettleIncomplete more) and looks a third time, so run --once still takes
// it.
//
// A writer that pauses with its file open can still be read half-way, so
// the inbox checks twice that what was imported is the whole file:
//
//   - after the import, before the move: the name must still lead to the
//     same file (inode), of the same size and modification time, with the
//     content the import read (a hash of the bytes read, compared with the
//     file read again); and the file moved must be that file (one renamed
//     into its place meanwhile is put back);
//   - after the move: for a day, every poll looks at the files moved to
//     processed/ or failed/ after their content was read. A writer that
//     kept the file open writes into the moved file; such a file is moved
//     back into the inbox. The records are files in the hidden folder
//     .paysync-watch (WatchDir) inside the inbox, so another process (a
//     restart, the next paysync run --once) keeps looking.
//
// A file that changed is logged at WARN, reported as OutcomeChanged (counted
// as waiting), left in the inbox, and imported again, whole, once it has
// settled. The import before holds what it read; importing the grown file
// recognises those entries as already imported (the ledger knows them by id
// and content; the presets derive ids from row content, numbering repeats in
// file order, so the rows read before get the same ids again) and imports
// the rest. The file's report (and, for a moved file, the report beside it)
// says what happened. A line a pause cut in half, for longer than the
// longer settle, may have been imported as it was then: when the file is
// then found to go on with its last line, a WARN says so and the file's
// next report quotes the line as it now reads (an import cannot be taken
// back here; the entry needs checking). Only the rename rules that out.
//
// A symbolic link is followed only when its target (after
// [filepath.EvalSymlinks]) is inside the inbox; a link that leads outside,
// or nowhere, is refused: the link itself is moved to failed/ with a report
// saying why.
//
// # What happens to a file
//
// The file is read (at most [Config.MaxFileSize] bytes; a larger file goes
// to failed/ with a report) and imported as source "inbox/<name>". Then:
//
//   - the import failed (payroll API unreachable, connection revoked, the
//     ledger, the context): the file stays where it is and is tried again
//     at the next poll. A file is never moved unless its import committed;
//   - the file is empty or not in a format paysync reads (no entry could
//     be read, nothing was recorded), whatever the policy: failed/;
//   - the file has problems and nothing was committed (policy
//     all-or-nothing, the default: the caller configures the importer with
//     AllOrNothing): failed/, with a report listing every problem;
//   - the file has problems and the good entries were committed and sent
//     (policy partial): processed/, with a report listing the rejects; if
//     no entry of it was good: failed/;
//   - the file changed after the import read it: left in the inbox (see
//     above);
//   - the same content was imported before: processed/ as a duplicate,
//     with a report naming that import;
//   - otherwise: processed/.
//
// A moved file is named "<UTC time 20060102T150405Z>-<name>" (a duplicate
// "<time>-<stem>.duplicate<ext>"); an existing name is never overwritten,
// "-2", "-3", … are added instead. Its report is "<moved name>.report.txt":
// what happened, the import id, the counts, every problem on its own line,
// and what to do next. processed/ and failed/ are created (mode 0700) inside
// the inbox, so that moving is a rename within one file system.
//
// # Crash safety
//
// The ledger, not the inbox, makes imports exactly once. If the process dies
// after an import committed but before its file was moved, the next poll
// imports the same content again: the ledger recognises its content hash,
// the importer reports a duplicate (and delivers any batches of the first
// import still open), and the file is moved to processed/ as a duplicate.
// Nothing is sent twice. The inbox's own memory (which files it has seen,
// and how big) lives only in the process; after a restart every file waits
// one more poll. The records of moved files are written before the move, so
// a crash right after a move leaves the file watched.
//
// # Scheduling
//
// [Inbox.Start] runs [Inbox.Poll] on a cron schedule
// (github.com/robfig/cron/v3): five or six fields (seconds optional),
// descriptors such as "@hourly" or "@every 1m" (an interval shorter than a
// second counts as one second), and an optional "CRON_TZ=Europe/Copenhagen "
// prefix; without it the schedule is in the local time zone. A poll is
// skipped while the previous one still runs, and a panic in a poll is logged
// and does not stop later polls (the job chain is SkipIfStillRunning wrapping
// Recover; the other order loses SkipIfStillRunning's token on a panic in
// cron v3.0.1, so that no poll would ever run again). [Inbox.RunNow]
// (SIGHUP, SIGUSR1) asks for a poll that begins after the ask: one in
// progress is followed by another, and the asked poll looks twice, a
// second (SettleLook) apart, so that it takes a file renamed into the inbox
// just before; [Inbox.Close] stops the schedule and waits for a poll in
// progress.
package inbox
