// @engram-memory/client: Engram's event contract for TypeScript platforms.
// See README.md for a whole turn loop.

export * from "./contract.js";
export { newId } from "./id.js";
export { encodeToken, decodeToken, tenantInbox, Subjects, InvalidSubjectError } from "./tokens.js";
export {
  decodeEvent, encodeEvent, newEvent, parseTime, validSubject, InvalidEventError,
  type FieldProblem, type Ref,
} from "./event.js";
export {
  connect, clientInbox, EngramClient, EventTooLargeError, InjectTimeoutError,
  type ClientOptions, type ConnectOptions, type Context, type Injection, type InjectOptions, type OutputsOptions,
  type OutputStream,
} from "./client.js";
