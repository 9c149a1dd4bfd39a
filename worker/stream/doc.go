// Package stream is paysync's NATS JetStream source: it consumes timesheet
// entries from a durable pull consumer and hands each message to a Sink that
// commits it to the ledger, acknowledging the message only after the commit.
//
// # Subjects and payload
//
// Entries are published on
//
//	timesheets.<company_id>.<source>
//
// (Subject builds such a subject, replacing characters a subject token cannot
// hold). The payload is one entry as JSON, or {"entries": [...]}, in the
// canonical schema (mapping/schema/entry.schema.json). The Nats-Msg-Id header
// names the entry's version: its id, ":" and the first 16 hex digits of the
// payload's SHA-256, so the stream drops a re-publish of the same version
// within its duplicate window (2 minutes) but keeps a corrected one; the
// ledger is the dedupe beyond it. From a shell:
//
//	m='{"id":"t-1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":7.5,"code":"T1"}'
//	nats pub timesheets.MV8x.toggl "$m" -H "Nats-Msg-Id:t-1:$(printf %s "$m" | sha256sum | cut -c1-16)"
//
// Publish does the same from Go, for `paysync publish`; Connect makes the
// connection both use (credentials, nkey, TLS, reconnecting forever).
//
// # Stream and consumer
//
// Unless Config.Bind is set, Start creates the stream when it does not exist
// (file storage, work-queue retention: a message acknowledged is removed) and
// never changes an existing one, whose limits belong to its operator. It
// creates or updates the durable pull consumer with explicit acks, AckWait,
// MaxDeliver (unlimited by default) and MaxAckPending from the Config, and no
// BackOff list (the server would use BackOff[0] as the ack deadline instead
// of AckWait). It also makes sure a stream keeps dead letters: an existing
// stream capturing Config.DeadLetter is used as it is, else it creates
// Config.DeadLetterStream (default "<Stream>_DEADLETTER"; file storage,
// limits retention, no limits: dead letters stay until re-driven or
// deleted). Several replicas share one durable, or split the companies with
// disjoint filters (Config.Filter "timesheets.MV8x.>"). With Bind, the
// stream and the consumer must exist already, as in accounts where paysync
// may not create them; their AckWait and MaxDeliver are then read from the
// server, and Start warns when no stream captures the dead-letter subject
// (dead letters would then be lost: deploy/nats/deadletter.json creates one)
// or when the consumer's MaxDeliver is finite (see Delivery). Which stream
// captures the dead-letter subject is part of the set-up: unanswered, it is
// asked again (paysync could not tell whether to create one), except when
// bound, where a locked-down account may not ask: dead letters then go
// through JetStream all the same, and out plainly only when no stream
// answers. StreamConfig is the stream Start creates; Probe looks at the
// same set-up without creating or changing anything (paysync doctor).
//
// # Connection
//
// Start returns promptly. While the server is unreachable, not ready, or
// refusing the set-up (Bind without the stream or the consumer, the
// dead-letter subject captured by the stream itself, an account at its
// stream limit, no JetStream), it goes on connecting and setting up in the
// background, so that a daemon stays up and delivers what its ledger holds
// meanwhile. Set-up retries back off, doubling from 250 ms up to 5 s while
// the server is not ready and up to a minute while it refuses: an operator's
// fix is picked up within a minute. The connection's changes (not
// reachable, connected, disconnected, reconnected) and each different
// set-up failure are logged once, with the URL's credentials hidden, never
// once per attempt (a refusal as an error); Status reports whether the
// source consumes and, if not, why (for /readyz: "stream set-up refused:
// …, retrying"). A refusal met at Start is no different from one met
// later: only a Config that fails validation (New) or a connection that
// cannot even be configured is an error that stops a daemon.
//
// # Delivery
//
// Messages are handled one at a time, in stream order except for retried
// ones. For each, Sink.Commit runs; while it runs, the source tells the server
// every AckWait/3 that the message is in progress, so a slow commit is not
// redelivered. Then:
//
//   - nil error (Committed or Duplicate): the ack is sent and its
//     confirmation awaited (DoubleAck), trying again for up to 15 s when it
//     goes unanswered (a server restarting). An ack that is still lost means
//     a redelivery, which the ledger reports as a Duplicate;
//   - *Invalid — a fault of the input itself, and only that: the original
//     data is published to the dead-letter subject (through JetStream when a
//     stream captures that subject, or may: see above; else as a plain NATS
//     message) with the headers Paysync-Reason, Paysync-Stream-Seq,
//     Paysync-Original-Subject and Paysync-Original-Msg-Id, and a
//     Nats-Msg-Id of its own
//     ("<stream>:<seq>:<original id>"), then the message is terminated and
//     never redelivered. If the dead-letter publish fails, the message is
//     retried later instead: nothing is dropped unrecorded;
//   - any other error is transient (payroll, ledger, network): the message
//     is redelivered after NakDelay, doubled per delivery and capped at
//     MaxNakDelay (one minute; never an immediate Nak, which would loop as
//     fast as the server can redeliver), for as long as the outage lasts.
//     It is never dead-lettered, with the default unlimited MaxDeliver. A
//     finite MaxDeliver (a bound consumer's, or configured) makes the server
//     stop delivering at the last delivery: there a message still failing is
//     dead-lettered with a reason saying it was a transient failure to be
//     re-driven, into a stream only (without one it stays in the source
//     stream, unconsumed), and Start warns about it.
//
// # Dead letters
//
// Redrive lists the dead letters (filtered by original subject or by
// sequence) and, once their cause is fixed, publishes each one's data again
// to its original subject, then removes it from the dead-letter stream once
// the source stream has acknowledged it: a crash between the two loses
// nothing, and running it again is harmless (the re-drive's Nats-Msg-Id,
// derived from the original id and the dead-letter sequence, is dropped
// within the duplicate window, and the ledger recognises the entries after
// it). `paysync deadletters` is its command line.
//
// Prefetch is bounded: at most PullMaxMessages messages wait in the client
// and MaxAckPending unacknowledged ones in the consumer. A message that waits
// in the client longer than AckWait is redelivered meanwhile, which is
// harmless (a Duplicate) but wasted work: keep PullMaxMessages times the
// typical commit time below AckWait.
//
// # Shutdown
//
// Close stops pulling, waits for the message being committed and for the
// server's confirmation of its ack, releases the messages already prefetched
// (so another replica gets them at once rather than after AckWait), and
// drains the connection. When Close's context ends first, the commit's
// context is cancelled and the connection closed: an unacknowledged message
// is then redelivered after AckWait, and the ledger makes that harmless.
package stream
