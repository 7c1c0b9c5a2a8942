/**
 * The wire protocol between devices and a parameter server in another process, over any
 * Communicator's send/recv: the server is rank 0 of its own world, device g is rank g + 1.
 *
 * A request is a header of five float64 (sent as ten float32 words) on tag REQUEST:
 *   [op, a, b, c, step]; arrays follow on tag DATA, answers come back on tag REPLY (header) and DATA.
 *   PULL                      → reply [version], then DATA weights
 *   PUSH computedAt lr bound  DATA grads → reply [staleness, applied]   (bound < 0: none)
 *   ELASTIC alpha             DATA x → DATA x after the exchange
 *   WAIT_TURN rank size       → reply [0] once turn % size = rank
 *   PASS_TURN                 (no reply)
 *   BYE                       (no reply; the device is done)
 *   FINISH                    → reply [0] once every device alive has sent FINISH (its last update is in)
 *   (while WAIT_TURN or FINISH waits, reply [STILL_WAITING] every keep-alive interval: the device
 *   waits again, and no wait for data outlasts its timeout however long the others take)
 *   SNAPSHOT                  → reply [version, buffers, length], then DATA weights, then DATA each
 *                               optimizer buffer (a copy taken at once: checkpoint sets)
 * A request's last value is the step the device is at (named if it dies).
 */
export enum PsOp {
  Pull = 1,
  Push = 2,
  Elastic = 3,
  WaitTurn = 4,
  PassTurn = 5,
  Bye = 6,
  Finish = 7,
  Snapshot = 8,
}
export enum PsTag {
  Request = 1,
  Reply = 2,
  Data = 3,
}
/** The first value of a keep-alive reply to WAIT_TURN or FINISH: not yet. */
export const STILL_WAITING = 1;

/** A header: five float64 values viewed as the Float32Array that send/recv move. */
export class PsHeader {
  readonly values = new Float64Array(5);
  readonly wire = new Float32Array(this.values.buffer);

  set(a: number, b = 0, c = 0, d = 0, e = 0): this {
    this.values[0] = a;
    this.values[1] = b;
    this.values[2] = c;
    this.values[3] = d;
    this.values[4] = e;
    return this;
  }
}
