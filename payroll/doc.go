// Package payroll is the client of the payroll (Danløn pay parts) GraphQL
// API: typed operations, the OAuth2 refresh-token source with rotation, the
// schema probe, exact wire numbers and error classification.
//
// Every operation is a constant GraphQL document with an operation name;
// values always travel as variables. The documents are built once from the
// server's schema, because variable types must match the server's argument
// types exactly (see Schema and Client.Documents).
//
// Numbers: units, rate and amount are decimals in this package's API. On the
// wire a Float is sent as the exact decimal text (7.5), an Int as a whole
// number of hundredths (7.5 → 750; the scale is configurable). A value that
// cannot be carried exactly is an error, never rounded.
//
// Errors: every call returns an *Error whose Class tells the caller what to
// do: NotApplied (safe to retry, honour RetryAfter), Rejected (permanent;
// Index names the item), Ambiguous (may have executed: reconcile before
// retrying a mutation) or Revoked (the refresh token was refused: stop and
// have an operator re-connect the payroll account). Read-only queries are
// retried a few times inside the client; mutations never are.
//
// Tokens: TokenSource uses the refresh_token grant against
// {auth}/auth/realms/{realm}/protocol/openid-connect/token, refreshes a
// quarter of the lifetime (at most a minute) before expiry, serializes
// refreshes (across processes too, with FileStore's lock), and persists a
// rotated refresh token before the access token that came with it is used.
// A crash between the server rotating the token and the save completing
// cannot be covered by any client: the server has already spent the old one.
package payroll
