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
// carries the entry id, so the stream drops a re-publish within its duplicate
// window (2 minutes); the ledger is the dedupe beyond it. From a shell:
//
//	nats pub timesheets.MV8x.toggl '{"id":"t-1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":7.5,"code":"T1"}' -H Nats-Msg-Id:t-1
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
// MaxDeliver and MaxAckPending from the Config, and no BackOff list (the
// server would use BackOff[0] as the ack deadline instead of AckWait). Several
// replicas share one durable, or split the companies with disjoint filters
// (Config.Filter "timesheets.MV8x.>"). With Bind, the stream and the consumer
// must exist already, as in accounts where paysync may not create them; their
// AckWait and MaxDeliver are then read from the server.
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
//   - *Invalid: the original data is published to the dead-letter subject
//     (through JetStream when a stream captures that subject, else as a plain
//     NATS message) with the headers Paysync-Reason, Paysync-Stream-Seq,
//     Paysync-Original-Subject and Nats-Msg-Id, then the message is
//     terminated and never redelivered. If the dead-letter publish fails, the
//     message is retried later instead: nothing is dropped unrecorded.
//     Without a stream on the dead-letter subject, only its subscribers at
//     that moment (and the error log) see a dead letter: create one, e.g.
//     `nats stream add DEADLETTER --subjects paysync.deadletter --defaults`, to keep them;
//   - any other error: the message is redelivered after NakDelay, doubled
//     per delivery and capped at one minute (never an immediate Nak, which
//     would loop as fast as the server can redeliver). At the MaxDeliver-th
//     delivery a failure is dead-lettered instead ("gave up after N
//     deliveries"), so a poison message neither blocks the consumer forever
//     nor disappears when the server stops delivering it. With the defaults
//     (2 s, 20 deliveries) that is after about a quarter of an hour.
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
